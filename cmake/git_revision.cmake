# Run at every build (target ip_git_revision): writes OUT, a header defining IP_GIT_REVISION as the
# source tree's commit (12 hex digits, "-dirty" when tracked files differ from it; "unknown" outside
# git), and rewrites it only when that changes, so only its two includers recompile after a commit.
# Configure-time values went stale: a build after new commits still named the commit of the last
# cmake run in every results file.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT rev)
  set(rev "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY "${SRC}"
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND rev "-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/git_revision.cmake; do not edit.\n#pragma once\n#define IP_GIT_REVISION \"${rev}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()

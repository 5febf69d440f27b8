// What CUDA devices this process can see. Host code only; safe to call on machines without a GPU.
#pragma once

#include <string>

namespace ip::cuda {

// Number of usable devices (0 when there is no driver or no device).
int device_count();

// One line per device ("0: NVIDIA H200, sm_90, 139.8 GiB"), or why there is none.
std::string describe_devices();

}  // namespace ip::cuda

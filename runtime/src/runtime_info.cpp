#include "mgt/runtime/runtime_info.hpp"

namespace mgt::rt {

std::string available_backends() { return ""; }

}  // namespace mgt::rt

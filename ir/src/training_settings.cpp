// Names of the training tasks and linear-layer formats, as the CLI takes them and reports print them.
#include "mgt/ir/training_settings.hpp"

namespace mgt::ir {

std::string to_string(Task task) {
  switch (task) {
    case Task::pretrain: return "pretrain";
    case Task::sft: return "sft";
    case Task::lora: return "lora";
    case Task::qlora: return "qlora";
  }
  return "?";
}

std::optional<Task> task_from_string(std::string_view text) {
  for (Task t : {Task::pretrain, Task::sft, Task::lora, Task::qlora})
    if (text == to_string(t)) return t;
  return std::nullopt;
}

std::string to_string(LinearFormat format) {
  switch (format) {
    case LinearFormat::none: return "none";
    case LinearFormat::fp8: return "fp8";
    case LinearFormat::mxfp8: return "mxfp8";
    case LinearFormat::nvfp4: return "nvfp4";
  }
  return "?";
}

}  // namespace mgt::ir

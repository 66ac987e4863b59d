// Model numerics the graph does not carry, read from the model's config file (executor.hpp).
#include "mgt/runtime/executor.hpp"

#include "mgt/ir/error.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace mgt::rt {

ModelNumerics read_model_numerics(const std::string& model_path) {
  const nlohmann::json doc = ir::read_json_file(model_path);
  ModelNumerics n;
  if (!doc.is_object() || doc.contains("format")) return n;  // mgt.graph/1: defaults
  const auto number = [&](const nlohmann::json& obj, const char* key, double fallback, const std::string& field) {
    if (!obj.contains(key) || obj.at(key).is_null()) return fallback;
    if (!obj.at(key).is_number()) throw ir::InputError(model_path, field, "expected a number");
    return obj.at(key).get<double>();
  };
  for (const char* key : {"rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"}) {
    if (doc.contains(key) && !doc.at(key).is_null()) {
      n.norm_eps = static_cast<float>(number(doc, key, 1e-5, key));
      break;
    }
  }
  n.rope.theta = number(doc, "rope_theta", 10000.0, "rope_theta");
  if (doc.contains("rope_scaling") && !doc.at("rope_scaling").is_null()) {
    const auto& rs = doc.at("rope_scaling");
    if (!rs.is_object()) throw ir::InputError(model_path, "rope_scaling", "expected an object or null");
    std::string type = "default";
    if (rs.contains("rope_type") && rs.at("rope_type").is_string()) type = rs.at("rope_type").get<std::string>();
    else if (rs.contains("type") && rs.at("type").is_string()) type = rs.at("type").get<std::string>();
    if (type == "llama3") {
      n.rope.factor = number(rs, "factor", 0.0, "rope_scaling.factor");
      n.rope.low_freq_factor = number(rs, "low_freq_factor", 1.0, "rope_scaling.low_freq_factor");
      n.rope.high_freq_factor = number(rs, "high_freq_factor", 4.0, "rope_scaling.high_freq_factor");
      n.rope.original_max_position_embeddings = static_cast<int64_t>(
          number(rs, "original_max_position_embeddings", 8192, "rope_scaling.original_max_position_embeddings"));
      if (n.rope.factor <= 0) throw ir::InputError(model_path, "rope_scaling.factor", "llama3 scaling needs factor > 0");
    } else if (type != "default") {
      throw ir::InputError(model_path, "rope_scaling.rope_type", "rope type '" + type + "' is not implemented by the CPU kernels",
                           "supported: default, llama3");
    }
  }
  return n;
}

}  // namespace mgt::rt

// Hugging Face config.json frontend: builds the Graph of a decoder-only transformer (embed block,
// one block per run of identical layers, head block) from the HfModel that hf_families.cpp reads.
// Graph conventions and the per-family layer shapes: docs/graph_format.md, "Hugging Face configs".
#include "hf_model.hpp"

#include "mgt/ir/error.hpp"
#include "mgt/ir/graph.hpp"
#include "mgt/ir/model_loader.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string_view>
#include <utility>

namespace mgt::ir {

namespace {

using DimSizes = std::map<char, int64_t>;
using hf::HfModel;
using hf::LayerKind;
using hf::Mixer;
using hf::Parallel;
using hf::QkNorm;

Op make_op(std::string name, OpKind kind, std::vector<std::string> inputs, std::string output) {
  Op op;
  op.name = std::move(name);
  op.kind = kind;
  op.inputs = std::move(inputs);
  op.output = std::move(output);
  return op;
}

// ---------------------------------------------------------------------------------------------
// Block builder: declares tensors from einsum-style dim strings so that each family's layer reads
// as a list of ops.

class BlockBuilder {
 public:
  BlockBuilder(std::string name, int64_t repeat, bool is_layer, DimSizes sizes) : sizes_(std::move(sizes)) {
    block_.name = std::move(name);
    block_.repeat = repeat;
    block_.is_layer = is_layer;
  }

  /// Appends to a block built already (the MTP layer gains its prediction head).
  BlockBuilder(Block existing, DimSizes sizes) : block_(std::move(existing)), sizes_(std::move(sizes)) {}

  /// Declares an activation (or, with `parameter`, a weight); `overrides` replace table sizes.
  void declare(const std::string& name, std::string_view dims, bool parameter, const DimSizes& overrides = {}) {
    if (find_tensor(block_, name)) return;
    TensorDecl t{name, {}, parameter};
    for (char c : dims) {
      const auto o = overrides.find(c);
      const int64_t size = is_symbolic_dim(c) ? 0 : o != overrides.end() ? o->second : sizes_.at(c);
      t.dims.push_back({c, size});
    }
    block_.tensors.push_back(std::move(t));
  }

  /// Contraction `spec` ("bsh,had->bsad") of activation `in` with `weight`; declares the weight
  /// (a parameter unless it already exists as an activation), the optional bias and the output.
  std::string contract(const std::string& op_name, const std::string& in, const std::string& weight,
                       const std::string& spec, const std::string& out, const std::string& bias = {},
                       const DimSizes& out_overrides = {}) {
    const auto comma = spec.find(',');
    const auto arrow = spec.find("->");
    const std::string out_dims = spec.substr(arrow + 2);
    declare(weight, spec.substr(comma + 1, arrow - comma - 1), /*parameter=*/true);
    declare(out, out_dims, /*parameter=*/false, out_overrides);
    Op op = make_op(op_name, OpKind::contraction, {in, weight}, out);
    op.einsum = spec;
    if (!bias.empty()) {
      std::string bias_dims;
      for (char c : out_dims)
        if (!is_symbolic_dim(c)) bias_dims += c;
      declare(bias, bias_dims, /*parameter=*/true);
      op.inputs.push_back(bias);
      op.einsum = spec.substr(0, arrow) + "," + bias_dims + spec.substr(arrow);
    }
    block_.ops.push_back(std::move(op));
    return out;
  }

  /// Norm of `in` over the dims of its weight (`weight_dims`, trailing dims of `in`).
  std::string norm(const std::string& op_name, const std::string& in, const std::string& weight_dims, NormKind kind,
                   bool bias, const std::string& out) {
    declare(op_name + "_w", weight_dims, /*parameter=*/true);
    if (bias) declare(op_name + "_b", weight_dims, /*parameter=*/true);
    copy_dims(in, out);
    Op op = make_op(op_name, OpKind::norm, {in, op_name + "_w"}, out);
    if (bias) op.inputs.push_back(op_name + "_b");
    op.norm = kind;
    block_.ops.push_back(std::move(op));
    return out;
  }

  /// An op whose output has exactly the dims of its first input (rope, residual, activation).
  std::string same_dims_op(Op op) {
    copy_dims(op.inputs.front(), op.output);
    std::string out = op.output;
    block_.ops.push_back(std::move(op));
    return out;
  }

  std::string residual(const std::string& name, const std::string& a, const std::string& b, const std::string& out) {
    return same_dims_op(make_op(name, OpKind::residual, {a, b}, out));
  }

  std::string rope(const std::string& name, const std::string& in, const std::string& out) {
    return same_dims_op(make_op(name, OpKind::rope, {in}, out));
  }

  std::string activation(const std::string& name, std::vector<std::string> in, ActivationKind kind,
                         const std::string& out, double clamp_limit = 0) {
    Op op = make_op(name, OpKind::activation, std::move(in), out);
    op.activation = kind;
    op.clamp_limit = clamp_limit;
    return same_dims_op(std::move(op));
  }

  void add(Op op, const std::string& out_dims = {}, const DimSizes& out_overrides = {}) {
    if (!out_dims.empty()) declare(op.output, out_dims, /*parameter=*/false, out_overrides);
    block_.ops.push_back(std::move(op));
  }

  Block take() { return std::move(block_); }

 private:
  void copy_dims(const std::string& from, const std::string& to) {
    if (find_tensor(block_, to)) return;
    TensorDecl t = *find_tensor(block_, from);
    t.name = to;
    block_.tensors.push_back(std::move(t));
  }

  Block block_;
  DimSizes sizes_;
};

// ---------------------------------------------------------------------------------------------
// Builders, one per sublayer family. Each appends ops reading `in` and returns the output name.

DimSizes dim_table(const HfModel& m) {
  DimSizes t{{'h', m.hidden}, {'a', m.heads}, {'k', m.kv_heads}, {'d', m.head_dim}, {'f', m.ffn}, {'v', m.vocab}};
  if (m.positions) t['p'] = m.positions;
  if (m.experts) t['e'] = m.experts;
  // Encoders: segment rows, patch pixels and the class-token row; the BERT heads' input and pooler
  // widths (j, u: both h, named apart so that h x h weights have two dims) and NSP's 2 classes.
  if (m.encoder.token_types) t['t'] = m.encoder.token_types;
  if (m.encoder.patch_pixels) t.insert({{'c', m.encoder.patch_pixels}, {'n', 1}});
  // CLIP: the shared embedding space z, and logit_scale, one value (n).
  if (m.encoder.projection) t.insert({{'z', m.encoder.projection}, {'n', 1}});
  if (m.encoder.mlm_head) t.insert({{'j', m.hidden}, {'u', m.hidden}, {'y', 2}});
  if (m.mtp_layers) t['j'] = m.hidden;
  // T5: relative position buckets x heads (w: the heads again, a table no mesh axis splits).
  if (m.encoder.relative_buckets) t.insert({{'u', m.encoder.relative_buckets}, {'w', m.heads}});
  if (m.mla) t.insert({{'r', m.q_lora}, {'l', m.kv_lora}, {'n', m.qk_nope}, {'g', m.qk_rope}, {'c', m.v_head}});
  return t;
}

/// Grouped-query attention: q/k/v projections, optional q/k norms, rope, attention core, o proj.
std::string add_attention(BlockBuilder& b, const HfModel& m, const std::string& in, int64_t sliding_window,
                          bool causal) {
  const bool bias = m.qkv_bias;
  std::string q = b.contract("q_proj", in, "wq", "bsh,had->bsad", "q", bias ? "bq" : "");
  std::string k = b.contract("k_proj", in, "wk", "bsh,hkd->bskd", "k", bias ? "bk" : "");
  const std::string v = b.contract("v_proj", in, "wv", "bsh,hkd->bskd", "v", bias ? "bv" : "");
  if (m.qk_norm == QkNorm::per_head) {
    q = b.norm("q_norm", q, "d", m.norm, false, "q_normed");
    k = b.norm("k_norm", k, "d", m.norm, false, "k_normed");
  } else if (m.qk_norm == QkNorm::full_width) {
    q = b.norm("q_norm", q, "ad", m.norm, false, "q_normed");
    k = b.norm("k_norm", k, "kd", m.norm, false, "k_normed");
  }
  if (m.positions == 0 && m.rope) {
    q = b.rope("q_rope", q, "q_rot");
    k = b.rope("k_rope", k, "k_rot");
  }
  Op core = make_op("attention", OpKind::attention_core, {q, k, v}, "attn");
  core.causal = causal;
  core.sliding_window = sliding_window;
  b.add(std::move(core), "bsad");
  return b.contract("o_proj", "attn", "wo", "bsad,adh->bsh", "attn_out", m.o_bias ? "bo" : "");
}

/// DeepSeek multi-head latent attention. The fused kv_a projection (h -> kv_lora + rope dims) is two
/// contractions with the same parameters; the shared rotary key joins k only inside the attention
/// kernel, so k carries the no-rope head dim `n` while q carries d = nope + rope.
std::string add_mla(BlockBuilder& b, const HfModel& m, const std::string& in) {
  std::string q;
  if (m.q_lora > 0) {
    const std::string qa = b.contract("q_a_proj", in, "wq_a", "bsh,hr->bsr", "q_a");
    const std::string qa_n = b.norm("q_a_norm", qa, "r", NormKind::rms, false, "q_a_normed");
    q = b.contract("q_b_proj", qa_n, "wq_b", "bsr,rad->bsad", "q");
  } else {
    q = b.contract("q_proj", in, "wq", "bsh,had->bsad", "q");
  }
  q = b.rope("q_rope", q, "q_rot");
  const std::string kv_a = b.contract("kv_a_proj", in, "wkv_a", "bsh,hl->bsl", "kv_a");
  const std::string k_pe = b.contract("k_pe_proj", in, "wk_pe", "bsh,hg->bsg", "k_pe");
  b.rope("k_pe_rope", k_pe, "k_pe_rot");
  const std::string kv_n = b.norm("kv_a_norm", kv_a, "l", NormKind::rms, false, "kv_a_normed");
  const std::string k = b.contract("k_b_proj", kv_n, "wk_b", "bsl,lan->bsan", "k");
  const std::string v = b.contract("v_b_proj", kv_n, "wv_b", "bsl,lac->bsac", "v");
  Op core = make_op("attention", OpKind::attention_core, {q, k, v}, "attn");
  core.causal = true;
  b.add(std::move(core), "bsac");
  return b.contract("o_proj", "attn", "wo", "bsac,ach->bsh", "attn_out");
}

/// Dense MLP: gated (gate, up, act, down) or plain (up, act, down). `prefix` keeps names unique when
/// a block holds two MLPs (DeepSeek shared experts); `ffn` overrides the table's f.
std::string add_mlp(BlockBuilder& b, const HfModel& m, const std::string& in, const std::string& prefix,
                    int64_t ffn) {
  const DimSizes f{{'f', ffn}};
  const auto n = [&](const std::string& s) { return prefix + s; };
  const bool bias = m.mlp_bias;
  // Declared up front so that f takes this MLP's size rather than the table's.
  if (m.gated_mlp) b.declare(n("w_gate"), "hf", /*parameter=*/true, f);
  b.declare(n("w_up"), "hf", /*parameter=*/true, f);
  b.declare(n("w_down"), "fh", /*parameter=*/true, f);
  if (bias && m.gated_mlp) b.declare(n("b_gate"), "f", /*parameter=*/true, f);
  if (bias) b.declare(n("b_up"), "f", /*parameter=*/true, f);
  const std::string up = b.contract(n("up_proj"), in, n("w_up"), "bsh,hf->bsf", n("up"), bias ? n("b_up") : "", f);
  std::string hidden;
  if (m.gated_mlp) {
    const std::string gate =
        b.contract(n("gate_proj"), in, n("w_gate"), "bsh,hf->bsf", n("gate"), bias ? n("b_gate") : "", f);
    hidden = b.activation(n("act"), {gate, up}, m.act, n("act_out"), m.glu_clamp);
  } else {
    hidden = b.activation(n("act"), {up}, m.act, n("act_out"));
  }
  return b.contract(n("down_proj"), hidden, n("w_down"), "bsf,fh->bsh", n("mlp_out"), bias ? n("b_down") : "");
}

/// Routed experts: router logits over all experts, top-k routing, per-expert gated MLP computed for
/// the k chosen experts (output e = top_k, weight e = num_experts), weighted combine.
std::string add_moe(BlockBuilder& b, const HfModel& m, const std::string& in) {
  const DimSizes topk{{'e', m.top_k}}, f{{'f', m.moe_ffn}};
  b.contract("router_proj", in, "w_router", "bsh,he->bse", "router_logits", m.router_bias ? "router_bias" : "");
  Op route = make_op("router", OpKind::router, {"router_logits"}, "routing");
  route.top_k = m.top_k;
  b.add(std::move(route), "bse", topk);
  DimSizes out_sizes = f;
  out_sizes['e'] = m.top_k;
  b.declare("w_expert_gate", "ehf", true, f), b.declare("w_expert_up", "ehf", true, f);
  b.declare("w_expert_down", "efh", true, f);
  // GPT-OSS: one bias per expert and output channel (e = every expert, as the weights).
  const bool bias = m.expert_bias;
  if (bias) b.declare("b_expert_gate", "ef", true, f), b.declare("b_expert_up", "ef", true, f);
  if (bias) b.declare("b_expert_down", "eh", true);
  const std::string gate = b.contract("expert_gate_proj", in, "w_expert_gate", "bsh,ehf->bsef", "expert_gate",
                                      bias ? "b_expert_gate" : "", out_sizes);
  const std::string up =
      b.contract("expert_up_proj", in, "w_expert_up", "bsh,ehf->bsef", "expert_up", bias ? "b_expert_up" : "", out_sizes);
  const std::string act = b.activation("expert_act", {gate, up}, m.act, "expert_act_out", m.glu_clamp);
  b.contract("expert_down_proj", act, "w_expert_down", "bsef,efh->bseh", "expert_out", bias ? "b_expert_down" : "", topk);
  return b.contract("combine", "expert_out", "routing", "bseh,bse->bsh", "moe_out");
}

/// Routed experts plus the shared expert when the model has one (Qwen2-MoE: scaled by a gate
/// h -> 1 whose sigmoid costs nothing worth modelling).
std::string add_moe_ffn(BlockBuilder& b, const HfModel& m, const std::string& in) {
  const std::string routed = add_moe(b, m, in);
  if (m.shared_ffn == 0) return routed;
  std::string shared = add_mlp(b, m, in, "shared_", m.shared_ffn);
  if (m.shared_gate) {
    // Not "shared_gate": that is the shared MLP's own gate projection output.
    b.contract("shared_expert_gate_proj", in, "w_shared_expert_gate", "bsh,h->bs", "shared_expert_gate");
    shared = b.contract("shared_expert_scale", shared, "shared_expert_gate", "bsh,bs->bsh", "shared_expert_scaled");
  }
  return b.residual("shared_add", routed, shared, "ffn_out");
}

/// Mamba-1 mixer (Gu & Dao 2023, Algorithm 2; transformers' MambaMixer): in_proj to x and the gate z,
/// depthwise causal conv over x (a contraction over the kernel taps c), SiLU, x_proj to the low-rank
/// dt and to B, C, dt_proj back to the channels, the selective scan, y * SiLU(z), out_proj. Channels
/// are f, so tp splits them as Megatron splits an MLP: in_proj and dt_proj column-parallel, x_proj
/// and out_proj row-parallel.
std::string add_mamba1(BlockBuilder& b, const HfModel& m, const std::string& in) {
  const bool bias = m.ssm.proj_bias;
  const std::string x = b.contract("in_proj_x", in, "w_in_x", "bsh,hf->bsf", "ssm_x", bias ? "b_in_x" : "");
  const std::string z = b.contract("in_proj_z", in, "w_in_z", "bsh,hf->bsf", "ssm_z", bias ? "b_in_z" : "");
  const std::string conv = b.contract("conv1d", x, "w_conv", "bsf,fc->bsf", "conv_out", m.ssm.conv_bias ? "b_conv" : "");
  const std::string xc = b.activation("conv_act", {conv}, ActivationKind::silu, "conv_act_out");
  std::string dt_low = b.contract("x_proj_dt", xc, "w_x_dt", "bsf,fr->bsr", "dt_low");
  std::string bm = b.contract("x_proj_b", xc, "w_x_b", "bsf,fn->bsn", "ssm_b");
  std::string cm = b.contract("x_proj_c", xc, "w_x_c", "bsf,fn->bsn", "ssm_c");
  if (m.ssm.dt_bc_norms) {  // Jamba
    dt_low = b.norm("dt_norm", dt_low, "r", NormKind::rms, false, "dt_low_normed");
    bm = b.norm("b_norm", bm, "n", NormKind::rms, false, "ssm_b_normed");
    cm = b.norm("c_norm", cm, "n", NormKind::rms, false, "ssm_c_normed");
  }
  const std::string dt = b.contract("dt_proj", dt_low, "w_dt", "bsr,rf->bsf", "ssm_dt", "b_dt");
  b.declare("A_log", "fn", /*parameter=*/true);
  b.declare("D", "f", /*parameter=*/true);
  b.add(make_op("selective_scan", OpKind::ssm_scan, {xc, dt, bm, cm, "A_log", "D"}, "ssm_y"), "bsf");
  const std::string y = b.activation("gate", {z, "ssm_y"}, ActivationKind::silu_glu, "gated");
  return b.contract("out_proj", y, "w_out", "bsf,fh->bsh", "mixer_out", bias ? "b_out" : "");
}

/// Mamba-2 mixer (Dao & Gu 2024, §7; Megatron-Core MambaMixer): in_proj to z, x (a heads x d head
/// dim), B, C (k groups x n state) and dt (one per head, plus dt_bias); depthwise conv and SiLU over
/// x, B, C; the SSD scan in chunks; gated RMSNorm over the channels; out_proj. As in Megatron-Core,
/// tp splits heads and groups (in_proj column-parallel, out_proj row-parallel, the norm local).
std::string add_mamba2(BlockBuilder& b, const HfModel& m, const std::string& in) {
  const bool bias = m.ssm.proj_bias;
  const std::string z = b.contract("in_proj_z", in, "w_in_z", "bsh,had->bsad", "ssm_z", bias ? "b_in_z" : "");
  const std::string x = b.contract("in_proj_x", in, "w_in_x", "bsh,had->bsad", "ssm_x", bias ? "b_in_x" : "");
  const std::string bm = b.contract("in_proj_b", in, "w_in_b", "bsh,hkn->bskn", "ssm_b", bias ? "b_in_b" : "");
  const std::string cm = b.contract("in_proj_c", in, "w_in_c", "bsh,hkn->bskn", "ssm_c", bias ? "b_in_c" : "");
  const std::string dt = b.contract("in_proj_dt", in, "w_in_dt", "bsh,ha->bsa", "ssm_dt", "dt_bias");
  const bool cb = m.ssm.conv_bias;
  const std::string xc = b.contract("conv1d_x", x, "w_conv_x", "bsad,adc->bsad", "conv_x", cb ? "b_conv_x" : "");
  const std::string bc = b.contract("conv1d_b", bm, "w_conv_b", "bskn,knc->bskn", "conv_b", cb ? "b_conv_b" : "");
  const std::string cc = b.contract("conv1d_c", cm, "w_conv_c", "bskn,knc->bskn", "conv_c", cb ? "b_conv_c" : "");
  const std::string xa = b.activation("conv_act_x", {xc}, ActivationKind::silu, "conv_x_act");
  const std::string ba = b.activation("conv_act_b", {bc}, ActivationKind::silu, "conv_b_act");
  const std::string ca = b.activation("conv_act_c", {cc}, ActivationKind::silu, "conv_c_act");
  b.declare("A_log", "a", /*parameter=*/true);
  b.declare("D", "a", /*parameter=*/true);
  Op scan = make_op("ssd_scan", OpKind::ssm_scan, {xa, dt, ba, ca, "A_log", "D"}, "ssm_y");
  scan.chunk_size = m.ssm.chunk;
  b.add(std::move(scan), "bsad");
  const std::string gated = b.activation("gate", {z, "ssm_y"}, ActivationKind::silu_glu, "gated");
  const std::string normed = b.norm("gated_norm", gated, "ad", NormKind::rms, false, "gated_normed");
  return b.contract("out_proj", normed, "w_out", "bsad,adh->bsh", "mixer_out", bias ? "b_out" : "");
}

/// The layer's dim table: a Mamba-1 layer's f is its channels (its MLP declares its own f), a
/// Mamba-2 layer's a, d, k are its heads, head dim and groups.
DimSizes layer_dims(const HfModel& m, Mixer mixer) {
  DimSizes t = dim_table(m);
  if (mixer == Mixer::mamba1)
    t.insert_or_assign('f', m.ssm.inner), t['n'] = m.ssm.state, t['r'] = m.ssm.dt_rank, t['c'] = m.ssm.conv;
  if (mixer == Mixer::mamba2) {
    t.insert_or_assign('a', m.ssm.heads), t.insert_or_assign('d', m.ssm.head_dim);
    t.insert_or_assign('k', m.ssm.groups), t['n'] = m.ssm.state, t['c'] = m.ssm.conv;
  }
  return t;
}

/// One transformer layer: attention and feed-forward sublayers, each wrapped with the family's
/// norm placement (pre: norm before, post: norm on the sublayer output) and a residual add.
/// Parallel layers (GPT-NeoX, Falcon) feed both sublayers from the layer input and add both.
Block build_layer(const HfModel& m, const std::string& name, int64_t repeat, LayerKind kind) {
  BlockBuilder b(name, repeat, /*is_layer=*/true, layer_dims(m, kind.mixer));
  b.declare("x", "bsh", false);
  const auto attention = [&](const std::string& in) {
    if (kind.mixer == Mixer::mamba1) return add_mamba1(b, m, in);
    if (kind.mixer == Mixer::mamba2) return add_mamba2(b, m, in);
    return m.mla ? add_mla(b, m, in) : add_attention(b, m, in, kind.sliding_window, !m.bidirectional);
  };
  const auto ffn = [&](const std::string& in) {
    return kind.moe ? add_moe_ffn(b, m, in) : add_mlp(b, m, in, "", m.ffn);
  };
  if (m.norm_after_residual) {  // BERT: x -> LN(x + attn(x)) -> LN(h1 + mlp(h1))
    const std::string a = b.residual("attn_residual", "x", attention("x"), "attn_sum");
    const std::string h1 = b.norm("attn_norm", a, "h", m.norm, m.norm_bias, "h1");
    const std::string f = b.residual("mlp_residual", h1, ffn(h1), "mlp_sum");
    b.norm("mlp_norm", f, "h", m.norm, m.norm_bias, "out");
    return b.take();
  }
  if (m.parallel != Parallel::none) {
    const std::string attn_in = b.norm("attn_norm", "x", "h", m.norm, m.norm_bias, "attn_in");
    const std::string mlp_in =
        m.parallel == Parallel::two_norms ? b.norm("mlp_norm", "x", "h", m.norm, m.norm_bias, "mlp_in") : attn_in;
    const std::string h1 = b.residual("attn_residual", "x", attention(attn_in), "h1");
    b.residual("mlp_residual", h1, ffn(mlp_in), "out");
    return b.take();
  }
  const auto sublayer = [&](const std::string& tag, const std::string& in, auto body) {
    std::string y = m.pre_norm ? b.norm(tag + "_norm", in, "h", m.norm, m.norm_bias, tag + "_in") : in;
    y = body(y);
    if (m.post_norm) y = b.norm(tag + "_post_norm", y, "h", m.norm, m.norm_bias, tag + "_normed");
    return y;
  };
  // A layer may be its mixer only (Mamba) or its MLP only (Nemotron-H '-'); the last residual is "out".
  std::string h1 = "x";
  if (kind.mixer != Mixer::none) {
    const std::string tag = kind.mixer == Mixer::attention ? "attn" : "mixer";
    h1 = b.residual(tag + "_residual", "x", sublayer(tag, "x", attention), kind.ffn ? "h1" : "out");
  }
  if (kind.ffn) b.residual("mlp_residual", h1, sublayer("mlp", h1, ffn), "out");
  return b.take();
}

/// Block name of a run of layers: "layer" (dense model), "dense_layer"/"moe_layer" (MoE model),
/// prefixed "local_"/"global_" when windows differ between layers.
std::string run_name(const HfModel& m, LayerKind kind) {
  std::string name = m.experts == 0 ? "layer" : kind.moe ? "moe_layer" : "dense_layer";
  if (m.ssm.inner > 0) {  // state-space and hybrid models: named by mixer, then MLP
    const char* mixer = kind.mixer == Mixer::attention ? "attn" : kind.mixer == Mixer::none ? "" : "mamba";
    const char* ffn = !kind.ffn ? "" : m.experts == 0 ? "mlp" : kind.moe ? "moe" : "mlp";
    name = std::string(mixer) + (*mixer && *ffn ? "_" : "") + ffn + "_layer";
  }
  for (const LayerKind& k : m.layer_kinds)
    if (k.sliding_window != m.layer_kinds.front().sliding_window)
      return (kind.sliding_window > 0 ? "local_" : "global_") + name;
  return name;
}

/// One block per run of equal consecutive layers; a name used by several runs gets the run's first
/// layer index ("moe_layer_3").
void add_layer_blocks(const HfModel& m, Graph& g) {
  struct Run {
    LayerKind kind;
    int64_t first = 0, count = 0;
  };
  std::vector<Run> runs;
  for (int64_t i = 0; i < m.layers; ++i) {
    const LayerKind& k = m.layer_kinds[size_t(i)];
    if (runs.empty() || !(runs.back().kind == k)) runs.push_back({k, i, 0});
    ++runs.back().count;
  }
  std::map<std::string, int> uses;
  for (const Run& r : runs) ++uses[run_name(m, r.kind)];
  for (const Run& r : runs) {
    std::string name = run_name(m, r.kind);
    if (uses[name] > 1) name += "_" + std::to_string(r.first);
    g.blocks.push_back(build_layer(m, name, r.count, r.kind));
  }
}

/// ViT and CLIP's vision tower: the patch GEMM over each patch's pixels (block input "x", dims b, s,
/// c; a bias in ViT, none in CLIP), learned positions and the class token as a one-row table added
/// to the embeddings (its concatenation at position 0 is not an op kind; the count and the cost are
/// the same); CLIP then normalises them (pre_layrnorm).
Block build_patch_embed(const HfModel& m, const std::string& name) {
  BlockBuilder b(name, 1, /*is_layer=*/false, dim_table(m));
  b.declare("x", "bsc", false);
  const std::string patches =
      b.contract("patch_proj", "x", "w_patch", "bsc,ch->bsh", "patches", m.encoder.patch_bias ? "b_patch" : "");
  b.declare("wpe", "ph", true);
  b.add(make_op("position_embedding", OpKind::embedding, {"wpe"}, "pos"), "bsh");
  const std::string with_pos = b.residual("add_positions", patches, "pos", "with_pos");
  b.declare("cls_token", "nh", true);
  b.add(make_op("class_token", OpKind::embedding, {"cls_token"}, "cls"), "bsh");
  const bool pre_norm = m.encoder.embed_pre_norm;
  const std::string embedded = b.residual("add_class_token", with_pos, "cls", pre_norm ? "embedded" : "out");
  if (pre_norm) b.norm("pre_layrnorm", embedded, "h", m.norm, m.norm_bias, "out");
  return b.take();
}

/// Token (and learned position, and BERT segment) embeddings, summed into "out"; BERT normalises
/// the sum.
void add_token_embeddings(BlockBuilder& b, const HfModel& m) {
  b.declare("wte", "vh", true);
  const bool sums = m.positions || m.encoder.token_types;
  b.add(make_op("token_embedding", OpKind::embedding, {"wte"}, sums ? "tok" : "out"), "bsh");
  std::string sum = "tok";
  const std::string last = m.encoder.embed_norm ? "embed_sum" : "out";
  if (m.positions) {
    b.declare("wpe", "ph", true);
    b.add(make_op("position_embedding", OpKind::embedding, {"wpe"}, "pos"), "bsh");
    sum = b.residual("embed_add", sum, "pos", m.encoder.token_types ? "tok_pos" : last);
  }
  if (m.encoder.token_types) {
    b.declare("w_token_type", "th", true);
    b.add(make_op("token_type_embedding", OpKind::embedding, {"w_token_type"}, "token_type"), "bsh");
    sum = b.residual("token_type_add", sum, "token_type", last);
  }
  if (m.encoder.embed_norm) b.norm("embed_norm", sum, "h", m.norm, m.norm_bias, "out");
}

Block build_embed(const HfModel& m, const std::string& name = "embed") {
  if (m.encoder.patch_pixels) return build_patch_embed(m, name);
  BlockBuilder b(name, 1, /*is_layer=*/false, dim_table(m));
  add_token_embeddings(b, m);
  return b.take();
}

/// LM head on `in` ("bsh"): the final norm unless the layers end normalised (post-LN), the
/// projection to the vocabulary (tied: "wte", laid out like the embedding table), the loss.
void add_lm_head(BlockBuilder& b, const HfModel& m, const std::string& in) {
  const std::string xn = m.norm_after_residual ? in : b.norm("final_norm", in, "h", m.norm, m.norm_bias, "x_norm");
  const std::string bias = m.lm_head_bias ? "b_lm_head" : "";
  if (m.tied) b.contract("lm_head", xn, "wte", "bsh,vh->bsv", "logits", bias);
  else b.contract("lm_head", xn, "w_lm_head", "bsh,hv->bsv", "logits", bias);
  b.add(make_op("loss", OpKind::softmax_cross_entropy, {"logits"}, ""));
}

/// BERT's pre-training heads, on every position (Megatron and transformers compute the MLM logits
/// for all tokens and mask the loss; the pooler and NSP classifier read only the [CLS] token, so
/// pricing them on every position is an upper bound of 2 x h x (h + 2) FLOPs per token). The input
/// is named in j so that the h x h transform and pooler weights have two distinct dims.
Block build_bert_head(const HfModel& m) {
  BlockBuilder b("head", 1, /*is_layer=*/false, dim_table(m));
  b.declare("x", "bsj", false);
  const std::string t = b.contract("mlm_transform", "x", "w_mlm_transform", "bsj,jh->bsh", "mlm_t", "b_mlm_transform");
  const std::string ta = b.activation("mlm_act", {t}, m.act, "mlm_t_act");
  const std::string tn = b.norm("mlm_norm", ta, "h", m.norm, m.norm_bias, "mlm_t_norm");
  add_lm_head(b, m, tn);
  if (m.encoder.nsp_head) {
    // The pooler's tanh is priced as the GELU (one elementwise pass either way).
    const std::string p = b.contract("pooler", "x", "w_pooler", "bsj,ju->bsu", "pooled", "b_pooler");
    const std::string pa = b.activation("pooler_act", {p}, m.act, "pooled_act");
    b.contract("nsp_proj", pa, "w_nsp", "bsu,uy->bsy", "nsp_logits", "b_nsp");
    b.add(make_op("nsp_loss", OpKind::softmax_cross_entropy, {"nsp_logits"}, ""));
  }
  return b.take();
}

/// Final norm, LM head and loss. A tied head reads "wte" laid out like the embedding table (v, h).
/// A CLIP tower's output: its last norm (vision: post_layernorm, text: final_layer_norm), then the
/// projection h -> z into the shared space, without a bias (none for a tower without projection).
/// CLIP pools one token per sample between the two (the class token; the end-of-text token); mgt
/// prices both on every position, an upper bound of 2 x h x z FLOPs per token
/// (docs/graph_format.md, "Encoders" (CLIP)).
std::string add_clip_output(BlockBuilder& b, const HfModel& t, const std::string& in, const std::string& tag) {
  const bool vision = t.encoder.patch_pixels > 0;
  const std::string normed =
      b.norm(vision ? "post_layernorm" : "final_layer_norm", in, "h", t.norm, t.norm_bias, tag + "_normed");
  if (!t.encoder.projection) return normed;
  const std::string proj = vision ? "visual_projection" : "text_projection";
  return b.contract(proj, normed, "w_" + proj, "bsh,hz->bsz", tag + "_embeds");
}

Block build_head(const HfModel& m) {
  if (m.encoder.mlm_head) return build_bert_head(m);
  BlockBuilder b("head", 1, /*is_layer=*/false, dim_table(m));
  b.declare("x", "bsh", false);
  if (m.model_type.starts_with("clip_")) add_clip_output(b, m, "x", "pooled");  // a tower alone: no loss
  else add_lm_head(b, m, "x");
  return b.take();
}

/// CLIP (docs/graph_format.md, "Encoders" (CLIP)): the vision tower (patch embedding, pre_layrnorm, its
/// layers); a bridge block that maps the vision output to the image embeddings (post_layernorm,
/// visual_projection; the head reads them as its "memory") and starts the text tower (token and
/// position embeddings); the text tower's causal layers; the head: final_layer_norm,
/// text_projection, the image-text similarities scaled by logit_scale, and the contrastive loss.
/// The similarities are priced per position against the sample's own image (2 x z FLOPs per token),
/// not against the whole batch as CLIP's loss computes them: b x B x z for a micro-batch of b pairs
/// and a global batch of B, which the graph does not know (docs: 0.5 % of ViT-B/32's FLOPs at B = 32768).
void add_clip_blocks(const HfModel& m, Graph& g) {
  const HfModel &vision = m.towers.at(0), &text = m.towers.at(1);
  g.blocks.push_back(build_embed(vision, "vision_embed"));
  g.blocks.push_back(build_layer(vision, "vision_layer", vision.layers, vision.layer_kinds.front()));
  BlockBuilder bridge("text_embed", 1, /*is_layer=*/false, dim_table(vision));
  bridge.declare("x", "bsh", false);
  add_clip_output(bridge, vision, "x", "image");  // the head's "memory"
  BlockBuilder text_embed(bridge.take(), dim_table(text));
  add_token_embeddings(text_embed, text);
  g.blocks.push_back(text_embed.take());
  g.blocks.push_back(build_layer(text, "text_layer", text.layers, text.layer_kinds.front()));
  BlockBuilder head("head", 1, /*is_layer=*/false, dim_table(text));
  head.declare("x", "bsh", false);
  const std::string text_embeds = add_clip_output(head, text, "x", "text");
  head.declare("memory", "bsz", false);
  const std::string sim = head.contract("similarity", text_embeds, "memory", "bsz,bsz->bs", "similarity");
  head.contract("logit_scale_mul", sim, "logit_scale", "bs,n->bsn", "logits");
  head.add(make_op("loss", OpKind::softmax_cross_entropy, {"logits"}, ""));
  g.blocks.push_back(head.take());
}

/// T5's relative position bias (first layer of each stack): a lookup of the [buckets, heads] table
/// for every query (its s x s expansion is added to the scores inside the attention kernel, not
/// priced separately; later layers reuse it).
void add_position_bias(BlockBuilder& b) {
  b.declare("w_relative_bias", "uw", true);
  b.add(make_op("relative_position_bias", OpKind::embedding, {"w_relative_bias"}, "position_bias"), "bsw");
}

/// Cross-attention: queries from the decoder, keys and values from the encoder output, which every
/// decoder layer reads as its second block input "memory"; no mask, no rope.
std::string add_cross_attention(BlockBuilder& b, const std::string& in) {
  const std::string q = b.contract("cross_q_proj", in, "w_cross_q", "bsh,had->bsad", "cross_q");
  b.declare("memory", "bsh", false);
  const std::string k = b.contract("cross_k_proj", "memory", "w_cross_k", "bsh,hkd->bskd", "cross_k");
  const std::string v = b.contract("cross_v_proj", "memory", "w_cross_v", "bsh,hkd->bskd", "cross_v");
  Op core = make_op("cross_attention", OpKind::attention_core, {q, k, v}, "cross_attn");
  core.causal = false;
  b.add(std::move(core), "bsad");
  return b.contract("cross_o_proj", "cross_attn", "w_cross_o", "bsad,adh->bsh", "cross_attn_out");
}

/// A T5 decoder layer: pre-norm causal self-attention, pre-norm cross-attention, pre-norm MLP, each
/// with its residual add.
Block build_t5_decoder_layer(const HfModel& m, const std::string& name, int64_t repeat, bool position_bias) {
  BlockBuilder b(name, repeat, /*is_layer=*/true, dim_table(m));
  b.declare("x", "bsh", false);
  const std::string sa = b.norm("attn_norm", "x", "h", m.norm, false, "attn_in");
  const std::string h1 = b.residual("attn_residual", "x", add_attention(b, m, sa, 0, /*causal=*/true), "h1");
  const std::string ca = b.norm("cross_attn_norm", h1, "h", m.norm, false, "cross_attn_in");
  const std::string h2 = b.residual("cross_attn_residual", h1, add_cross_attention(b, ca), "h2");
  const std::string mi = b.norm("mlp_norm", h2, "h", m.norm, false, "mlp_in");
  b.residual("mlp_residual", h2, add_mlp(b, m, mi, "", m.ffn), "out");
  if (position_bias) add_position_bias(b);
  return b.take();
}

/// T5: embed, encoder layers (the first with the position bias table), the encoder's final norm
/// with the decoder's token embedding (the shared table, tied), decoder layers, head. One sequence
/// length s serves encoder and decoder (docs/graph_format.md, "Encoders").
void add_t5_blocks(const HfModel& m, Graph& g) {
  const int64_t enc = m.layers, dec = m.encoder.decoder_layers;
  BlockBuilder first(build_layer(m, "encoder_layer_0", 1, m.layer_kinds.front()), dim_table(m));
  add_position_bias(first);
  g.blocks.push_back(first.take());
  if (enc > 1) g.blocks.push_back(build_layer(m, "encoder_layer", enc - 1, m.layer_kinds.front()));
  BlockBuilder bridge("decoder_embed", 1, /*is_layer=*/false, dim_table(m));
  bridge.declare("x", "bsh", false);
  bridge.norm("encoder_final_norm", "x", "h", m.norm, false, "encoder_out");  // the decoder layers' "memory"
  bridge.declare("wte", "vh", true);
  bridge.add(make_op("token_embedding", OpKind::embedding, {"wte"}, "out"), "bsh");
  g.blocks.push_back(bridge.take());
  g.tied_parameters.push_back({"embed.wte", "decoder_embed.wte"});
  g.blocks.push_back(build_t5_decoder_layer(m, "decoder_layer_0", 1, true));
  if (dec > 1) g.blocks.push_back(build_t5_decoder_layer(m, "decoder_layer", dec - 1, false));
}

/// DeepSeek-V3 multi-token prediction (DeepSeek-V3 report §2.2; Megatron-Core MTP), depth by depth:
/// the main model's last hidden state (before its final norm) and the embedding of the next token
/// are each RMS-normalised, concatenated and projected 2h -> h (eh_proj, two h x h halves summed),
/// then one more transformer layer (the kind of the last main layer: MoE in V3) and the shared
/// output head with its own norm. The embedding and output head are the main model's (tied), so
/// only eh_proj, the norms and the layer are new parameters. Two blocks per depth, because the
/// concatenation's h x h halves need the input named apart from the output (j, then h).
void add_mtp_blocks(const HfModel& m, Graph& g) {
  for (int64_t d = 0; d < m.mtp_layers; ++d) {
    const std::string suffix = m.mtp_layers > 1 ? "_" + std::to_string(d) : "";
    BlockBuilder p("mtp_proj" + suffix, 1, /*is_layer=*/false, dim_table(m));
    p.declare("x", "bsh", false);
    const std::string hn = p.norm("hnorm", "x", "h", m.norm, m.norm_bias, "h_normed");
    p.declare("wte", "vh", true);
    p.add(make_op("token_embedding", OpKind::embedding, {"wte"}, "emb"), "bsh");
    const std::string en = p.norm("enorm", "emb", "h", m.norm, m.norm_bias, "e_normed");
    const std::string from_h = p.contract("eh_proj_h", hn, "w_eh_h", "bsh,hj->bsj", "eh_h");
    const std::string from_e = p.contract("eh_proj_e", en, "w_eh_e", "bsh,hj->bsj", "eh_e");
    p.residual("eh_sum", from_h, from_e, "out");
    g.blocks.push_back(p.take());
    g.tied_parameters.push_back({"embed.wte", "mtp_proj" + suffix + ".wte"});

    const std::string layer_name = "mtp_layer" + suffix;
    Block layer = build_layer(m, layer_name, 1, m.layer_kinds.back());
    layer.is_layer = false;  // Megatron places MTP on the last pipeline stage, beside the head
    BlockBuilder l(std::move(layer), layer_dims(m, m.layer_kinds.back().mixer));
    add_lm_head(l, m, "out");
    g.blocks.push_back(l.take());
    g.tied_parameters.push_back({m.tied ? "embed.wte" : "head.w_lm_head",
                                 layer_name + "." + std::string(m.tied ? "wte" : "w_lm_head")});
  }
}

ModelInfo model_info(const HfModel& m, const std::string& source) {
  ModelInfo info;
  info.name = std::filesystem::path(source).stem().string();
  info.architecture = m.architecture;
  info.num_layers = m.layers + m.encoder.decoder_layers;
  info.hidden_size = m.hidden;
  info.num_attention_heads = m.heads;  // 0 for pure Mamba stacks
  info.num_kv_heads = m.kv_heads;
  info.vocab_size = m.vocab;
  info.max_seq_len = m.max_pos;
  info.num_experts = m.experts;
  info.experts_per_token = m.top_k;
  info.has_mla = m.mla;
  info.dim_sources = m.dim_sources;
  return info;
}

}  // namespace

Graph graph_from_hf_config(const nlohmann::json& config, const std::string& source) {
  const HfModel m = hf::read_hf_model(config, source);
  Graph g;
  g.info = model_info(m, source);
  if (!m.towers.empty()) {
    add_clip_blocks(m, g);
    return g;
  }
  g.blocks.push_back(build_embed(m));
  if (m.encoder.decoder_layers > 0) {
    add_t5_blocks(m, g);
  } else {
    add_layer_blocks(m, g);
  }
  g.blocks.push_back(build_head(m));
  if (m.tied) g.tied_parameters.push_back({"embed.wte", "head.wte"});
  add_mtp_blocks(m, g);
  return g;
}

}  // namespace mgt::ir

"""Loads mgt-plan exports with each framework's own parser (run by scripts/check-exports).

argv[1]: a TSV of model, gpus, seq_len, format, file. MGT_MEGATRON / MGT_AXOLOTL: optional source
checkouts. Prints one line per export and exits 1 when any fails to load.
"""
import importlib.util
import json
import os
import sys
import traceback
import types


def load_accelerate(path, gpus):
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser
    from accelerate.parallelism_config import ParallelismConfig

    config = load_config_from_file(path)  # ClusterConfig: rejects unknown top-level keys
    dests = {a.dest for a in launch_command_parser()._actions}
    for section in ("fsdp_config", "parallelism_config"):
        for key in (getattr(config, section) or {}):
            assert key in dests, f"{section}.{key} is no `accelerate launch` argument"
    assert config.num_processes == gpus, f"num_processes {config.num_processes} != {gpus}"
    pc = config.parallelism_config or {}
    if pc:
        parallelism = ParallelismConfig(
            dp_replicate_size=pc["parallelism_config_dp_replicate_size"],
            dp_shard_size=pc["parallelism_config_dp_shard_size"],
            tp_size=pc["parallelism_config_tp_size"],
            cp_size=pc["parallelism_config_cp_size"],
        )
        # ParallelismConfig._validate_accelerator's rule, without an Accelerator (it needs GPUs).
        assert parallelism.total_size == config.num_processes, "total_size != num_processes"


def load_deepspeed(path, gpus, dp):
    import deepspeed.runtime.config as ds_config
    from deepspeed.runtime.config import DeepSpeedConfig

    # DeepSpeedConfig asks the process group for its rank first and, without one, falls back to a world
    # of 1; this rank stands in for the process group, the batch rule then divides by the mpu's dp world.
    ds_config.dist.get_rank = lambda *args, **kwargs: 0

    class Mpu:  # the data-parallel world DeepSpeed's batch rule divides by
        def get_data_parallel_world_size(self):
            return dp

        def get_data_parallel_rank(self):
            return 0

    with open(path) as f:
        DeepSpeedConfig(json.load(f), mpu=Mpu())


def load_torchtitan(path, gpus):
    from torchtitan.config.manager import ConfigManager

    directory, name = os.path.split(path)
    module = "mgt_export_" + name.replace("-", "_").replace(".", "_")
    link = os.path.join(directory, module + ".py")
    if not os.path.exists(link):
        os.symlink(name, link)
    sys.path.insert(0, directory)
    base = None
    with open(path) as f:
        if 'MGT_TORCHTITAN_BASE", "")' in f.read():
            # torchtitan ships no config for this model: the plan's fields on the Llama 3 debug model.
            base = "torchtitan.models.llama3.config_registry:llama3_debugmodel"
    note = ""
    try:
        config = parse_torchtitan(ConfigManager, module, base)
    except ValueError as e:
        if "float8" not in str(e) or base:
            raise
        # torchtitan's own 405B config builds float8 linears, which it refuses without an SM89+ GPU:
        # the plan's fields are then checked on the Llama 3 debug model's config.
        config = parse_torchtitan(ConfigManager, module, "torchtitan.models.llama3.config_registry:llama3_debugmodel")
        note = " (on llama3_debugmodel: torchtitan's own base config needs an SM89+ GPU for float8)"
    p = config.parallelism
    product = (p.data_parallel_replicate_degree * p.data_parallel_shard_degree * p.context_parallel_degree
               * p.tensor_parallel_degree * p.pipeline_parallel_degree)
    assert product == gpus, f"ParallelDims product {product} != {gpus}"
    if p.pipeline_parallel_degree > 1:
        note += check_torchtitan_pipeline(p, model_layers(path))
    return note


def model_layers(export_path):
    """The layer count of the export's model, from examples/models/<model>.json."""
    model = os.path.basename(export_path).split("_")[0]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "examples", "models", model + ".json")) as f:
        return json.load(f)["num_hidden_layers"]


def check_torchtitan_pipeline(parallelism, num_layers):
    """torchtitan's own stage count and split for the model's layer count, against the estimator's."""
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part, _get_pipeline_metadata

    dims = types.SimpleNamespace(pp=parallelism.pipeline_parallel_degree)
    stages, layers, first, last = _get_pipeline_metadata(dims, parallelism, types.SimpleNamespace(layers=[0] * num_layers))
    parts = _generate_llm_fqn_per_model_part(stages, layers, first, last)
    per_stage = [sum(name.startswith("layers.") for name in part) for part in parts]
    assert sum(per_stage) == num_layers, f"stages hold {sum(per_stage)} of {num_layers} layers"
    middle = parallelism.pipeline_parallel_layers_per_stage
    expected = [middle - first] + [middle] * (stages - 2) + [middle - last]
    assert per_stage == expected, f"torchtitan splits {per_stage}, the plan assumes {expected}"
    return f"; pipeline: {stages} stages of {per_stage[0]}..{middle}..{per_stage[-1]} layers (torchtitan's split)"


def parse_torchtitan(config_manager, module, base):
    old = os.environ.get("MGT_TORCHTITAN_BASE")
    if base:
        os.environ["MGT_TORCHTITAN_BASE"] = base
    sys.modules.pop(module, None)  # the module reads MGT_TORCHTITAN_BASE when imported
    try:
        return config_manager().parse_args(["--module", module, "--config", "mgt_plan"])
    finally:
        if base:
            os.environ.pop("MGT_TORCHTITAN_BASE")
        if old is not None:
            os.environ["MGT_TORCHTITAN_BASE"] = old


def load_torchtitan_toml(path, gpus):
    import tomllib

    with open(path, "rb") as f:
        tomllib.load(f)  # torchtitan 0.2's loader; 0.3 reads no TOML, so only the syntax is checked here


def load_megatron(path, gpus, checkout):
    import shlex
    import subprocess

    # The script's PLAN_ARGS array, expanded by bash itself.
    flags = subprocess.run(["bash", "-c", f'source <(sed -n "/^PLAN_ARGS=(/,/^)/p" {shlex.quote(path)}); '
                            'printf "%s\\n" "${PLAN_ARGS[@]}"'], capture_output=True, text=True, check=True)
    argv = flags.stdout.split()
    sys.path.insert(0, checkout)
    from megatron.training.arguments import parse_args, validate_args

    model = ["--hidden-size", "4096", "--num-attention-heads", "32", "--max-position-embeddings", "131072",
             "--tokenizer-type", "NullTokenizer", "--vocab-size", "128256", "--mock-data"]
    if "--num-layers" not in argv:
        model += ["--num-layers", "32"]
    # The user's model flags of an MoE model name its experts (mgt's plan gives only ep).
    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "models",
                           os.path.basename(path).split("_")[0] + ".json")) as f:
        hf = json.load(f)
    experts = hf.get("num_local_experts") or hf.get("num_experts")
    if experts:
        model += ["--num-experts", str(experts), "--moe-router-topk", str(hf.get("num_experts_per_tok", 2))]
    # validate_args asks the GPU for its architecture; the plans are for H100s (Hopper, 9.0), so the
    # check stands in that answer on a machine without one.
    import torch
    import megatron.training.arguments as megatron_arguments

    megatron_arguments.get_device_arch_version = lambda: 9
    torch.cuda.get_device_capability = lambda *args, **kwargs: (9, 0)
    sys.argv = ["pretrain_gpt.py"] + model + argv
    args = parse_args()
    args.world_size, args.rank = gpus, 0
    env = os.environ.copy()
    if "export CUDA_DEVICE_MAX_CONNECTIONS=1" in open(path).read():
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    try:
        validate_args(args)
    finally:
        os.environ.clear()
        os.environ.update(env)


def load_axolotl(path, gpus, checkout):
    import yaml

    sys.path.insert(0, os.path.join(checkout, "src"))
    from axolotl.utils.schemas.config import AxolotlInputConfig

    with open(path) as f:
        text = f.read()
    doc = yaml.safe_load(text)
    doc.update({"base_model": "meta-llama/Llama-3.1-8B", "datasets": [{"path": "x", "type": "alpaca"}],
                "learning_rate": 1e-5, "num_epochs": 1})
    note = ""
    if doc.get("context_parallel_size", 1) > 1:
        # Axolotl's schema imports ring_flash_attn for cp > 1, which imports flash-attn, a CUDA build this
        # check cannot install; the export must tell the user to install it, and the schema then runs
        # with an empty module standing in for the package.
        assert "pip install" in text and "ring-flash-attn" in text, "cp > 1 but the file does not say to install ring-flash-attn"
        if "ring_flash_attn" not in sys.modules and importlib.util.find_spec("ring_flash_attn") is None:
            sys.modules["ring_flash_attn"] = types.ModuleType("ring_flash_attn")
            sys.modules["ring_flash_attn"].mgt_stand_in = True
        if getattr(sys.modules.get("ring_flash_attn"), "mgt_stand_in", False):
            note = " (ring_flash_attn stood in: it needs flash-attn, a CUDA build)"
    AxolotlInputConfig(**doc)
    return note


def main():
    failures = 0
    megatron, axolotl = os.environ.get("MGT_MEGATRON"), os.environ.get("MGT_AXOLOTL")
    with open(sys.argv[1]) as index:
        rows = [line.rstrip("\n").split("\t") for line in index if line.strip()]
    for model, gpus, seq, fmt, path in rows:
        gpus = int(gpus)
        note = ""
        try:
            if fmt == "accelerate":
                load_accelerate(path, gpus)
            elif fmt == "deepspeed":
                with open(path) as f:
                    doc = json.load(f)
                dp = doc["train_batch_size"] // (doc["train_micro_batch_size_per_gpu"] * doc["gradient_accumulation_steps"])
                load_deepspeed(path, gpus, dp)
            elif fmt == "torchtitan":
                note = load_torchtitan(path, gpus)
            elif fmt == "torchtitan@0.2":
                load_torchtitan_toml(path, gpus)
            elif fmt == "megatron":
                if not megatron:
                    print(f"skipped  {fmt:15} {model} on {gpus} (no --megatron checkout)")
                    continue
                load_megatron(path, gpus, megatron)
            elif fmt == "axolotl":
                if not axolotl:
                    print(f"skipped  {fmt:15} {model} on {gpus} (no --axolotl checkout)")
                    continue
                note = load_axolotl(path, gpus, axolotl)
            print(f"loaded   {fmt:15} {model} on {gpus}, seq {seq}{note}")
        except Exception as e:  # report every export, then fail once
            failures += 1
            print(f"FAILED   {fmt:15} {model} on {gpus}, seq {seq}: {type(e).__name__}: {e}")
            traceback.print_exc(limit=2, file=sys.stdout)
    print(f"{len(rows) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

// `mgt-plan run config.json [--plan P] [--weights W | --resume DIR] [--data F --data-dtype uint16|uint32]
//  --seq-len S --global-batch G --steps N [--seed] [--lr --beta1 --beta2 --eps --weight-decay --grad-clip]
//  [--log F] [--save DIR] [--trace F] [--cluster C]`: lowers the plan and trains with the CPU schedule
// executor (docs/runtime_executor.md). One rank, or `mpirun -np <ranks> mgt-plan run ...`, one process
// per rank over an MpiCommunicator on the schedule's mesh; rank 0 prints, writes --log, --save and
// --trace, and ends with the simulator's prediction for the same schedule on --cluster against the
// measurement (docs/runtime_run.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <set>
#include <string>

namespace mgt::cli {

struct RunOptions {
  std::string model_path;       ///< HF config.json or mgt.graph/1
  std::string plan = "{}";      ///< inline JSON or a mgt.plan/1 file
  std::string weights;          ///< safetensors file / index / folder; empty: init from --seed
  std::string data;             ///< token file; empty: synthetic tokens from --seed
  std::string data_dtype = "uint16";
  int64_t seq_len = 0;          ///< required unless --resume (then the checkpoint's)
  int64_t global_batch = 0;     ///< sequences per optimizer step; required unless --resume
  int64_t document_tokens = 0;  ///< --document-tokens: packed documents per sequence; 0 = one per sequence
  int64_t steps = 0;
  uint64_t seed = 0;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;  ///< torch.optim.AdamW defaults
  double grad_clip = 0.0;       ///< global-norm clipping; 0 = off
  std::string log_path;         ///< one JSON line per step, then one {"summary": ...} line
  std::string cluster = "h100-sxm";  ///< for the lowering and the predicted step time / memory
  std::string save_dir;         ///< checkpoint folder written after the last step (rank 0, atomically)
  std::string resume_dir;       ///< checkpoint folder to continue from (every rank loads it)
  std::string trace_path;       ///< Chrome trace of the last step: measured on rank 0 beside the simulation
  std::string backend = "cpu";  ///< cpu, cuda (bf16 GEMMs) or cuda-fp32; cuda needs a device (else exit 1)
  /// --comm-timeout: seconds a rank waits in one collective or transfer before it names the lost rank
  /// and ends the job (MPI: polled, then MPI_Abort; NCCL: ncclCommAbort); 0 = no limit
  double comm_timeout_s = 300;
  std::string task = "pretrain";  ///< pretrain or sft (the runtime trains every weight; lora / qlora refused)
  std::set<std::string> given;  ///< flags given on the command line ("--lr", ...), filled by the parser
};

/// Adds the `run` subcommand and its flags, bound to `options`.
CLI::App* add_run_command(CLI::App& app, RunOptions& options);

/// Checks the flags, builds (lowers the plan, starts the ranks, loads the state, opens the data,
/// prices the schedule with the simulator) and runs rt::Trainer::train(): one line per step (loss,
/// step time, tokens/s, peak memory measured from the executor's allocations, the schedule's planned
/// peak) and --log, from rank 0 only; then --save and the predicted-vs-measured summary; then --trace.
/// Returns 0, or 2 after printing the error when the executor cannot run the plan (several ranks: the
/// failing rank prints it and aborts the job); ir::InputError (bad flags, files, a launcher world size
/// that differs from the plan's) propagates to main's handler.
int run_training(const RunOptions& options);

}  // namespace mgt::cli

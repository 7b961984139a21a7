# End-to-end tests of the trainsim binary: golden figures from the docs and the issue, and
# every class of bad input exits 1 with a message naming the field.
# A golden figure (cli/tests/golden.py): exit code 0 and the output matching the regular
# expression, checked together.
function(trainsim_cli_test name regex)
  add_test(NAME cli.${name}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 0 "${regex}"
                   $<TARGET_FILE:trainsim> ${ARGN})
endfunction()
# A bad input: exit code 1 (usage or configuration) and a message naming the field.
function(trainsim_cli_error name regex)
  add_test(NAME cli.error.${name}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 1 "${regex}"
                   $<TARGET_FILE:trainsim> ${ARGN})
endfunction()
# A refusal checked whole (cli/tests/refuses.sh): exit code 1 and a message matching the
# extended regular expression.
function(trainsim_cli_refuses name regex)
  add_test(NAME cli.refuses.${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/refuses.sh "${regex}"
                   $<TARGET_FILE:trainsim> ${ARGN})
endfunction()

# Golden figures.
trainsim_cli_test(time_cs336 "\"days\": 143\\.9[0-9]*"
  time --params 70e9 --tokens 15T --gpu h100-sxm --num-gpus 1024 --mfu 0.5 --format json)
trainsim_cli_test(model_gpt2 "\"total\": 124439808"
  model --model gpt2 --format json)
trainsim_cli_test(memory_zero1 "\"total\": 31406250000"
  memory --params 7.5e9 --num-gpus 64 --zero 1 --format json)
# The lecture's premise is 80 GB per GPU (80e9 bytes); the h100-sxm preset's own capacity is
# the device's 79.11 GiB (84.94 GB).
trainsim_cli_test(memory_max_params "\"zero3\": 40000000000"
  memory --gpu h100-sxm --gpu-memory-gb 80 --num-gpus 8 --max-params --format json)
trainsim_cli_test(memory_max_params_12 "\"zero3\": 53333333333"
  memory --gpu h100-sxm --gpu-memory-gb 80 --num-gpus 8 --max-params --precision bf16 --format json)
trainsim_cli_test(memory_max_params_device "\"zero3\": 42470000000"
  memory --gpu h100-sxm --num-gpus 8 --max-params --format json)
trainsim_cli_test(memory_fits "\"fits\": true,.*\"total\": 41483546112[.]0,"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --zero 3 --seq-len 4096 --format json)
# The verdict of the asked micro-batch is that of the allocator capped at the GPU's memory, as
# max_micro_batch's: at the largest micro-batch it reports, the step fits (a fit-side
# configuration).
trainsim_cli_test(memory_verdict_under_the_cap "\"fits\": true,[^}]*\"max_micro_batch\": 44,"
  memory --framework pytorch --model cs336-medium --attention naive --recompute full --seq-len 1024
  --gpu h200 --gpu-memory-gb 24 --micro-batch 44 --format json)
# Above that safe answer the allocator's verdict is not monotone: 117 fits again, and the table
# says so.
trainsim_cli_test(memory_fits_again_above "micro-batch 117 fits again.*107 is the safe answer"
  memory --framework pytorch --model cs336-large --attention naive --recompute full --seq-len 1024
  --gpu h200 --gpu-memory-gb 80 --micro-batch 107)
trainsim_cli_test(memory_does_not_fit "DOES NOT FIT: 576[.]85 GB of 84[.]94 GB \\(679%\\), misses by 491[.]91 GB"
  memory --model llama3-70b --gpu h100-sxm --num-gpus 8)
trainsim_cli_test(presets_list "llama3-405b" presets list models)
trainsim_cli_test(presets_list_frameworks "frameworks +deepspeed +DeepSpeed ZeRO stages 1-3.*frameworks +fsdp +PyTorch FSDP2 .*frameworks +megatron"
  presets list frameworks)
trainsim_cli_test(presets_show_framework "\"name\": \"fsdp\".*\"zero_stages\": \\[[^]]*0,[^]]*2,[^]]*3"
  presets show fsdp)
trainsim_cli_error(presets_show_bad_kind "presets show --kind frameworx: unknown kind \\(models, gpus, clusters, profiles, frameworks\\)"
  presets show fsdp --kind frameworx)
trainsim_cli_test(csv_output "^quantity,value,exact\nparams total,124439808,124439808\n"
  model --model gpt2 --format csv --quiet)

# Bad input: unknown presets, malformed JSON, bad fields, impossible layouts.
trainsim_cli_error(unknown_model "did you mean llama3-8b" model --model llama3-8)
trainsim_cli_error(unknown_gpu "unknown gpu preset" memory --model gpt2 --gpu h1000)
trainsim_cli_error(malformed_json "bad.json:3:[0-9]+: malformed JSON"
  model --model ${CMAKE_CURRENT_SOURCE_DIR}/testdata/bad.json)
trainsim_cli_error(unknown_field "unknown field" model --model ${CMAKE_CURRENT_SOURCE_DIR}/testdata/unknown_field.json)
trainsim_cli_error(missing_file "no such file" model --model /nonexistent/config.json)
trainsim_cli_error(negative_layers "num_layers = -2: must be positive" model --model gpt2 --num-layers -2)
trainsim_cli_error(absurd_hidden "hidden_size = 99999999: absurdly large" model --model gpt2 --hidden-size 99999999)
trainsim_cli_error(tp_heads "tp = 5: must divide num_heads = 32"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 5 --tp 5)
trainsim_cli_error(pp_layers "pp = 64: must not exceed num_layers = 32"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 64 --pp 64 --dp 1)
trainsim_cli_error(layout_gpus "must equal num_gpus = 8"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --tp 2 --dp 3)
trainsim_cli_error(zero_stage "--zero = 5: must be 0, 1, 2 or 3"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --zero 5)
trainsim_cli_error(bad_tokens "--tokens = 'lots'" time --params 7e9 --tokens lots --gpu h100-sxm)
trainsim_cli_error(bad_mfu "--mfu = 1.5" time --params 7e9 --tokens 1T --gpu h100-sxm --mfu 1.5)
trainsim_cli_error(neg_seq "seq_len = -5: must be positive"
  memory --model gpt2 --gpu h100-sxm --seq-len -5)
trainsim_cli_error(bad_precision "precision" memory --model gpt2 --gpu h100-sxm --precision fp64)
trainsim_cli_error(no_machine "--gpu or --cluster" memory --model gpt2)
trainsim_cli_error(learned_positions "exceeds the model's learned positions"
  memory --model gpt2 --gpu h100-sxm --seq-len 4096)

# Step simulator, collectives, roofline, sweep, published validation.
trainsim_cli_test(validate_published "mean \\|error\\| 4[.]7% \\(limit 5%\\), max \\|error\\| 9[.]4% \\(limit 10%\\): PASS"
  validate-published)
trainsim_cli_test(estimate_json "\"step_time_s\": [0-9.e+-]+,?"
  estimate --model llama3-8b --gpu h100-sxm --num-gpus 8 --global-batch 64 --seq-len 4096 --format json)
trainsim_cli_test(estimate_keys "\"breakdown_s\": \\{[^}]*\"bubble\": 0\\.0,[^}]*\"dp_comm\": 0\\.0010786[0-9]*,[^}]*\"forward\": 0\\.0032127[0-9]*,[^}]*\"optimizer\"[^}]*\"pp_comm\"[^}]*\"recompute\"[^}]*\"tp_comm\""
  estimate --model gpt2 --gpu a100-80g --num-gpus 8 --seq-len 1024 --format json --tokens 1B)
# MoE parallel folding: ep over tp x dp with whole experts (etp 1); the rules it keeps.
trainsim_cli_test(estimate_moe_folding "ep 16 \\(etp 1: experts folded over tp x dp x cp\\)"
  estimate --model qwen3-30b-a3b --cluster dgx-h100 --num-gpus 16 --tp 2 --ep 16 --etp 1 --sequence-parallel --global-batch 16 --seq-len 4096)
trainsim_cli_error(moe_folding_needs_sp "folded experts need sequence parallelism"
  estimate --model qwen3-30b-a3b --cluster dgx-h100 --num-gpus 16 --tp 2 --ep 16 --etp 1 --global-batch 16 --seq-len 4096)
# Combined 1F1B (--ep-overlap): the all-to-alls hide behind the other pass; its rules.
trainsim_cli_test(estimate_ep_overlap "combined 1F1B\\): 3 merged forward/backward pairs per rank hid"
  estimate --model mixtral-8x7b --cluster dgx-h100 --num-gpus 8 --ep 8 --global-batch 32 --seq-len 4096 --ep-overlap)
trainsim_cli_error(ep_overlap_no_ep "--ep-overlap: needs expert parallelism \\(ep > 1\\)"
  estimate --model mixtral-8x7b --cluster dgx-h100 --num-gpus 8 --global-batch 32 --seq-len 4096 --ep-overlap)
trainsim_cli_error(ep_overlap_pipeline "--ep-overlap: needs the interleaved schedule with a pipeline"
  estimate --model mixtral-8x7b --cluster dgx-h100 --num-gpus 8 --pp 2 --ep 4 --global-batch 32 --seq-len 4096 --ep-overlap)
# Megatron-Core's gradient buffers in bf16 (--grad-reduce-dtype) and where the option is refused.
trainsim_cli_test(memory_grad_reduce_bf16 "gradients +16\\.06"
  memory --model llama3-8b --cluster dgx-h100 --num-gpus 8 --cp 2 --zero 1 --global-batch 128 --seq-len 8192 --precision fp8 --grad-reduce-dtype bf16)
# Under PyTorch's per-process cap (--allocator-cap-gb): reserved bytes against the cap, and the
# largest micro-batch a training loop runs under it (the answer `compare` scores: 4 is the
# boundary measured for this pair, oom-pytorch-cs336-medium-bf16-mixed-naive-none-s1024-cap24).
trainsim_cli_test(memory_allocator_cap
  "FITS: reserved 10[.]51 GB of the allocator's 24[.]00 GB cap \\(44%\\).*largest micro-batch that fits: 4\n"
  memory --framework pytorch --model cs336-medium --attention naive --seq-len 1024 --gpu h200
  --allocator-cap-gb 24)
# One OOM boundary: what `memory --allocator-cap-gb` says for a recorded pair is the figure
# `compare` scores it with (oom-pytorch-cs336-large-bf16-mixed-naive-full-s1024-cap40, a test
# pair measured at 46 by the probes: both say 43).
add_test(NAME cli.oom_boundary_memory_is_compare
         COMMAND bash -c "t=$<TARGET_FILE:trainsim> && m=$($t memory --framework pytorch --model cs336-large --attention naive --recompute full --seq-len 1024 --gpu h200 --allocator-cap-gb 40 | sed -n 's/.*largest micro-batch that fits: \\([0-9]*\\).*/\\1/p') && c=$($t compare --framework-runs ${PROJECT_SOURCE_DIR}/validate/results/runs-2026-12-02/oom-c.jsonl | awk '/naive-full-s1024-cap40/ {print $(NF-2)}') && echo \"memory $m, compare $c\" && test -n \"$m\" && test \"$m\" = \"$c\" && test \"$m\" = 43")
trainsim_cli_error(allocator_cap_needs_allocator "--allocator-cap-gb: the megatron profile does not simulate PyTorch's caching allocator"
  memory --model llama3-8b --gpu h100-sxm --allocator-cap-gb 24)
trainsim_cli_error(allocator_cap_above_gpu "--allocator-cap-gb 200: above the 84[.]94 GB of the h100-sxm"
  memory --framework pytorch --model cs336-medium --gpu h100-sxm --allocator-cap-gb 200)
trainsim_cli_error(allocator_cap_needs_model "--allocator-cap-gb: needs --model"
  memory --framework pytorch --params 1e9 --allocator-cap-gb 20)
trainsim_cli_error(grad_reduce_not_megatron "--framework fsdp keeps its own gradients"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --framework fsdp --grad-reduce-dtype bf16)
# Megatron-Core's activation CPU offload (--offload-activation-layers) and its rules.
# Fit-side naive attention with full recompute under the cap: the allocator model replays
# PyTorch's own sequence to its verdict (validate/results/fixtures/allocator-traces-fit-naive/).
trainsim_cli_test(compare_allocator_traces_fit_naive "the model's verdict is PyTorch's for 2 of 2 traces"
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-fit-naive/pytorch-cs336-medium-bf16-mixed-naive-full-b178-s1024-cap80.trace.gz ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-fit-naive/pytorch-cs336-large-bf16-mixed-naive-full-b36-s2048-cap80.trace.gz)
# trainsim's own generated step for that configuration reserves 81.59 GB where PyTorch's step
# reserved 78.62 (+3.8%): under the 80 GB cap it predicts out of memory where PyTorch's ran, a
# known miss of the generated step for naive attention with full recompute (docs/frameworks.md,
# "Under a cap: the OOM boundary").
trainsim_cli_test(compare_allocator_traces_fit_naive_generated
  "\"measured_fits_under_cap\": true,[^}]*\"predicted_fits_under_cap\": false,[^}]*\"predicted_peak_reserved_bytes\": 815[0-9]{8}[.]"
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-fit-naive/pytorch-cs336-large-bf16-mixed-naive-full-b36-s2048-cap80.trace.gz
  --with-prediction --format json)
trainsim_cli_test(compare_allocator_traces_fit_naive_capped
  "\"predicted_fits_under_cap\": true,[^}]*\"predicted_peak_reserved_bytes\": 36196614984\\..*\"predicted_fits_under_cap\": true,[^}]*\"predicted_peak_reserved_bytes\": 22805430097\\..*\"predicted_fits_under_cap\": true,[^}]*\"predicted_peak_reserved_bytes\": 23492012684\\."
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-fit-naive-capped/pytorch-cs336-large-bf16-mixed-naive-full-b13-s2048-cap40.trace.gz
  ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-fit-naive-capped/pytorch-cs336-large-bf16-mixed-naive-full-b4-s2048-cap24.trace.gz
  ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-fit-naive-capped/pytorch-cs336-medium-bf16-mixed-naive-full-b45-s1024-cap24.trace.gz
  --with-prediction --format json)
trainsim_cli_test(memory_offload_activations "activation offload \\(40 layers\\): [0-9.]+ GB of activations in host memory"
  memory --model llama3-70b --cluster gb200-nvl72 --num-gpus 64 --zero 3 --micro-batch 2 --global-batch 256 --seq-len 8192 --precision fp8 --offload-activation-layers 40)
trainsim_cli_test(estimate_offload_activations "activation offload: [0-9.]+ GB per micro-batch to host memory and back"
  estimate --model llama3-70b --cluster gb200-nvl72 --num-gpus 64 --zero 3 --micro-batch 2 --global-batch 256 --seq-len 8192 --precision fp8 --offload-activation-layers 40)
trainsim_cli_test(estimate_recompute_layers "recompute full \\(16 layers per chunk\\)"
  estimate --model llama3-8b --cluster dgx-a100 --num-gpus 64 --framework fsdp --zero 3 --global-batch 64
  --seq-len 8192 --recompute full --recompute-layers 16)
trainsim_cli_test(estimate_recompute_layers_json "\"recompute_layers\": 16"
  estimate --model llama3-8b --cluster dgx-a100 --num-gpus 64 --framework fsdp --zero 3 --global-batch 64
  --seq-len 8192 --recompute full --recompute-layers 16 --format json)
trainsim_cli_test(memory_recompute_modules "recompute selective \\(core_attn,layernorm,moe_act\\).*activations +62\\.29 +58\\.01"
  memory --model gpt-oss-120b --cluster dgx-h100 --num-gpus 64 --pp 4 --ep 8 --micro-batch 4 --global-batch 512
  --seq-len 4096 --grad-reduce-dtype bf16 --recompute selective --recompute-modules core_attn,layernorm,moe_act)
trainsim_cli_test(estimate_recompute_modules_json "\"recompute\": 0\\.60657[0-9]*,.*\"recompute_modules\": \"core_attn,moe\""
  estimate --model mixtral-8x7b --cluster dgx-h100 --num-gpus 8 --ep 8 --global-batch 16 --seq-len 4096
  --recompute selective --recompute-modules core_attn --recompute-modules moe --format json)
trainsim_cli_error(recompute_modules_unknown "--recompute-modules 'moe_acts': unknown module"
  estimate --model mixtral-8x7b --gpu h100-sxm --ep 8 --recompute selective --recompute-modules moe_acts)
trainsim_cli_error(recompute_modules_not_selective "--recompute-modules moe_act: needs --recompute selective"
  estimate --model mixtral-8x7b --gpu h100-sxm --ep 8 --recompute full --recompute-modules moe_act)
trainsim_cli_error(recompute_modules_framework "--framework fsdp does not have them"
  memory --model mixtral-8x7b --gpu h100-sxm --num-gpus 8 --ep 8 --framework fsdp --zero 3 --recompute selective --recompute-modules moe_act)
trainsim_cli_test(memory_min_recompute_layers "recompute needed to fit: full recompute of [0-9]+ layers per model chunk \\(--recompute full --recompute-layers [0-9]+\\)"
  memory --model llama3-8b --cluster dgx-h100 --num-gpus 8 --framework fsdp --zero 3 --micro-batch 2 --seq-len 8192)
trainsim_cli_test(memory_min_recompute_layers_band "within the memory band \\(\\+-[0-9]+%\\): [0-9]+ to [0-9]+"
  memory --model cs336-xl --gpu h200 --framework pytorch --seq-len 1024 --micro-batch 16 --gpu-memory-gb 78.75)
trainsim_cli_test(memory_min_recompute_layers_band_json "\"min_recompute_layers_high\": [0-9]+"
  memory --model cs336-xl --gpu h200 --framework pytorch --seq-len 1024 --micro-batch 16 --gpu-memory-gb 78.75 --format json)
# The fsdp profile's memory caveat: said where the step (or the recompute answer) runs full
# recompute through the generated FSDP2 step, not without recompute.
trainsim_cli_test(memory_fsdp_full_recompute_caveat "FITS: 13\\.74 GB of 150\\.11 GB[^\n]*largest micro-batch that fits: 664.*caveat \\(fsdp\\): memory with full recompute"
  memory --framework fsdp --model cs336-medium --gpu h200 --recompute full --micro-batch 32)
trainsim_cli_test(memory_fsdp_no_recompute_no_caveat "\"caveats\": \\[\\],.*\"max_micro_batch\": 89,.*\"peak_reserved_bytes\": 57810585821\\."
  memory --framework fsdp --model cs336-medium --gpu h200 --micro-batch 32 --format json)
trainsim_cli_test(memory_fsdp_recompute_answer_caveat "\"caveats\": \\[\n +\"memory with full recompute.*\"max_micro_batch\": 5,.*\"min_recompute_layers\": 12,"
  memory --framework fsdp --model llama3.2-1b --gpu h200 --micro-batch 8 --seq-len 2048 --gpu-memory-gb 58 --format json)
# The generated step as an allocator trace: written by `memory --allocator-trace-out`, replayed
# by `compare --allocator-traces` to the simulated peaks that `memory` used (the eager naive
# full-recompute step, played from its recorded program: reserved 12.88 GB), and predicted
# again from its own header.
add_test(NAME cli.memory_allocator_trace_out_replays
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 0 "trainsim-pytorch-cs336-medium-b16-s1024 +[0-9]+ +11\\.40 GB +- +12\\.51 GB +- +- +11\\.37 GB +12\\.48 GB\n.*1 trace\\(s\\) without measured peaks"
                 bash -c "d=$(mktemp -d) && t=$<TARGET_FILE:trainsim> && $t memory --framework pytorch --model cs336-medium --attention naive --recompute full --seq-len 1024 --micro-batch 16 --gpu h200 --allocator-trace-out $d/g.trace > /dev/null && $t compare --allocator-traces $d/g.trace --with-prediction; rc=$?; rm -rf $d; exit $rc")
trainsim_cli_error(allocator_trace_out_needs_allocator "the megatron profile does not simulate PyTorch's caching allocator"
  memory --model llama3-8b --gpu h100-sxm --allocator-trace-out unused.trace)
trainsim_cli_error(allocator_trace_out_unwritable "--allocator-trace-out /nonexistent-dir/g.trace: cannot create a file in /nonexistent-dir"
  memory --framework fsdp --model cs336-small --gpu h100-sxm --allocator-trace-out /nonexistent-dir/g.trace)
trainsim_cli_test(plan_search_recompute_layers "full\\([0-9]+\\)"
  plan --model llama3-70b --cluster dgx-h100 --num-gpus 32 --global-batch 64 --seq-len 8192 --fix tp=4
  --fix pp=8 --fix zero=1 --search-recompute-layers --top 3)
trainsim_cli_error(recompute_layers_not_full "recompute_layers = 4: needs recompute = full"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --recompute selective --recompute-layers 4)
trainsim_cli_error(plan_recompute_layers_fix "--recompute-layers 4: needs full recompute"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 8 --global-batch 64 --recompute-layers 4
  --fix recompute=none)
trainsim_cli_error(offload_not_megatron "--offload-activation-layers 4: Megatron-Core's activation CPU offload"
  estimate --model llama3-8b --gpu h100-sxm --num-gpus 8 --framework fsdp --offload-activation-layers 4)
trainsim_cli_error(offload_pipeline "offload_activation_layers = 4: needs pp = 1"
  estimate --model llama3-8b --gpu h100-sxm --num-gpus 8 --pp 2 --offload-activation-layers 4)
trainsim_cli_error(grad_reduce_value "--grad-reduce-dtype = fp16: must be framework, fp32 or bf16"
  estimate --model llama3-8b --gpu h100-sxm --num-gpus 8 --grad-reduce-dtype fp16)
trainsim_cli_error(moe_etp_value "etp = 4: must be 0 \\(= tp\\), tp = 2, or 1"
  estimate --model qwen3-30b-a3b --cluster dgx-h100 --num-gpus 16 --tp 2 --ep 8 --etp 4 --sequence-parallel --global-batch 16 --seq-len 4096)
trainsim_cli_test(collective_busbw "busbw \\(GB/s\\).*1073741824 +268435456 +float +6422[.]91 +167[.]17 +329[.]12 +inter-node"
  collective --op all-reduce --bytes 1G --num-gpus 64 --cluster dgx-h100 --sweep --max-bytes 1G)
trainsim_cli_test(collective_p1 "P = 1: no communication" collective --op all-reduce --num-gpus 1 --gpu h200)
trainsim_cli_test(roofline_gemm "gemm 8192x8192x8192 +1099[.]512 +402[.]65 +2730[.]7 +compute"
  roofline --gpu h100-sxm --op gemm --m 8192 --n 8192 --k 8192)
trainsim_cli_test(roofline_model "attn[.]core[.]fwd +137[.]439 +84[.]41 +1628[.]2 +compute"
  roofline --gpu h200 --model llama3-8b --seq-len 4096)
trainsim_cli_test(sweep_csv "^value,step_time_s,mfu,[^\n]*\n1,0[.]0270165547,0[.]415199,151611,"
  sweep --model gpt2 --gpu a100-80g --seq-len 1024 --micro-batch 4 --vary num-gpus --values 1,2,4,8 --format csv --quiet)
trainsim_cli_error(sweep_bad_vary "--vary = colour" sweep --model gpt2 --gpu a100-80g --vary colour --values 1)
trainsim_cli_error(estimate_batch "must be a multiple of micro_batch_size x dp"
  estimate --model llama3-8b --gpu h100-sxm --num-gpus 8 --global-batch 12)
trainsim_cli_error(cluster_gpus "must be a multiple of the cluster's gpus_per_node"
  estimate --model llama3-8b --cluster dgx-h100 --num-gpus 12)
trainsim_cli_test(estimate_caveat_cp "cp_comm \\(exposed\\) +101\\.84 .*step 13\\.49 s.*caveat \\(fsdp\\): context parallelism as torchtitan ran it"
  estimate --model llama3.1-8b --cluster grand-teton-h100 --num-gpus 8 --cp 2 --zero 3 --seq-len 65536 --precision fp8 --recompute full --framework fsdp)
trainsim_cli_test(estimate_caveat_moe_json "\"caveats\": \\[[^\"]*\"MoE layers.*\"step_time_s\": 0\\.438079[0-9]*,"
  estimate --model qwen3-30b-a3b --cluster dgx-b200 --num-gpus 8 --ep 8 --seq-len 4096 --precision mxfp8 --format json)
trainsim_cli_test(compare_runs_breakdown_json "\"breakdown_s\": {[^}]*\"cp_comm\": 0\\.101838[0-9]*,"
  compare --framework-runs ${PROJECT_SOURCE_DIR}/validate/published/data/torchtitan-benchmarks.jsonl --format json)
trainsim_cli_test(plan_names_framework_and_caveat "framework megatron; objective time.*\n1 +1 +1 +1 +8 +32 +2 +3 +none +off +1 +1\\.684 +24\\.1% +188\\.6\n.*caveat \\(megatron\\): MoE layers"
  plan --model qwen3-30b-a3b --cluster dgx-b200 --num-gpus 8 --seq-len 4096 --global-batch 64 --top 3)
trainsim_cli_test(sweep_names_framework "sweep of cp for llama3.1-8b \\(framework fsdp\\).*caveat \\(fsdp\\): context parallelism"
  sweep --model llama3.1-8b --cluster grand-teton-h100 --framework fsdp --zero 3 --seq-len 65536 --vary cp --values 1,2)
trainsim_cli_error(collective_op "--op = all-sum" collective --op all-sum --gpu h200)

# Plan search.
trainsim_cli_test(plan_json "\"evaluated\": [0-9]+,[ \n]*\"feasible\": [1-9][0-9]*,"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 64 --global-batch 256 --seq-len 4096 --format json --top 3)
trainsim_cli_test(plan_bench "space 7168 candidates, 2736 evaluated by the cost model \\(56 with uneven stages\\), 2736 feasible.*identical results: yes"
  plan --model gpt2 --gpu a100-80g --num-gpus 8 --global-batch 64 --seq-len 1024 --bench)
trainsim_cli_error(plan_no_feasible "no feasible plan.*does not fit in GPU memory"
  plan --model llama3-405b --cluster dgx-h100 --num-gpus 8 --global-batch 8 --seq-len 8192)
trainsim_cli_error(plan_fix_contradicts "--fix tp=3: must divide num_heads = 32"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 8 --global-batch 8 --fix tp=3)
trainsim_cli_error(plan_fix_unknown "unknown dimension 'colour'"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 8 --global-batch 8 --fix colour=1)
trainsim_cli_error(plan_no_batch "--global-batch: required"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 8)
trainsim_cli_error(plan_gpus "must be a multiple of the cluster's gpus_per_node"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 9 --global-batch 8)

# Uneven pipeline stages: Llama 3 405B's 126 layers on 16 stages as 7, 8 x 14, 7 (Dubey et al.
# 2024, Sec. 3.3.2): the explicit list and Megatron-LM's first/last flags, the stage that sets
# the pace (8 layers outweigh 7 + the LM head) and the fullest one (15 micro-batches of 8 layers).
set(LLAMA405 --model llama3-405b --cluster dgx-h100 --num-gpus 8192 --tp 8 --pp 16 --seq-len 8192
    --global-batch 2048 --sequence-parallel)
trainsim_cli_test(estimate_pp_layers
  "uneven stages 7,8x14,7: the slowest is stage 1 \\(8 layers, [0-9.]+ ms per micro-batch\\); the fullest is stage 1 \\(8 layers, 15 micro-batches in flight\\)"
  estimate ${LLAMA405} --pp-layers 7,8x14,7)
# The README's command and line.
trainsim_cli_test(readme_llama405
  "uneven stages 7,8x14,7: the slowest is stage 1 \\(8 layers, 282.03 ms per micro-batch\\); the fullest is stage 0 \\(7 layers, 17.875 micro-batches in flight\\)"
  estimate --model llama3-405b --cluster dgx-h100 --num-gpus 8192 --tp 8 --pp 16 --seq-len 8192
  --global-batch 2048 --sequence-parallel --zero 2 --interleave 8 --pp-layers 7,8x14,7 --tokens 15.6T)
trainsim_cli_test(estimate_megatron_first_last "\"slowest_stage\": 1,[ \n]*\"slowest_stage_layers\": 8"
  estimate ${LLAMA405} --decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 7 --format json)
trainsim_cli_test(memory_pp_layers "fullest pipeline stage 1 \\(8 layers\\) holds 3.19 B params and 15 micro-batches"
  memory ${LLAMA405} --pp-layers 7,8x14,7)
trainsim_cli_test(sweep_pp_layers "^value,step_time_s.*\n1,13\\.5186[0-9]*,[^\n]*,84829964800,true\n"
  sweep ${LLAMA405} --pp-layers 7,8x14,7 --vary micro-batch --values 1,2 --format csv --quiet)
trainsim_cli_test(plan_uneven "1 +8 +16 \\[7,8x14,7\\]"
  plan --model llama3-405b --cluster dgx-h100 --num-gpus 8192 --global-batch 2048 --seq-len 8192 --fix tp=8 --fix pp=16 --top 3)
trainsim_cli_test(plan_pinned_layers "uneven_stages_evaluated\": [1-9]"
  plan --model llama3-405b --cluster dgx-h100 --num-gpus 8192 --global-batch 2048 --seq-len 8192 --pp-layers 6,8x14,8 --format json --top 1)
trainsim_cli_error(pp_indivisible_hint
  "pp x interleave = 16 x 1: must divide num_layers = 126, or give the layers of each stage \\(stage_layers, e.g. 7,8x14,7: flags --pp-layers"
  estimate --model llama3-405b --cluster dgx-h100 --num-gpus 8192 --tp 8 --pp 16 --seq-len 8192)
trainsim_cli_error(pp_layers_sum "stage_layers = 7,8x14,6: sum to 125, must sum to num_layers = 126"
  estimate ${LLAMA405} --pp-layers 7,8x14,6)
trainsim_cli_error(pp_layers_count "stage_layers = 7,8x13,7: has 15 entries, must have one per pipeline stage \\(pp = 16\\)"
  estimate ${LLAMA405} --pp-layers 7,8x13,7)
trainsim_cli_error(pp_layers_syntax "--pp-layers = '7,a': 'a' is not a whole number"
  estimate ${LLAMA405} --pp-layers 7,a)
trainsim_cli_error(pp_layers_zero "--pp-layers = '0,9x14,0': 0 is out of range"
  memory ${LLAMA405} --pp-layers 0,9x14,0)
trainsim_cli_error(pp_layers_both "give only one form of the stage split"
  estimate ${LLAMA405} --pp-layers 7,8x14,7 --decoder-first-pipeline-num-layers 7)
trainsim_cli_error(megatron_first_indivisible
  "--decoder-first-pipeline-num-layers = 5: the other 15 stages must split the remaining 121 of num_layers = 126 evenly"
  estimate ${LLAMA405} --decoder-first-pipeline-num-layers 5)
trainsim_cli_error(megatron_needs_pp "--decoder-last-pipeline-num-layers: needs pipeline parallelism"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --decoder-last-pipeline-num-layers 4)
trainsim_cli_error(pp_layers_interleave "with interleave = 9 a stage needs a layer per model chunk, at least 9"
  estimate ${LLAMA405} --pp-layers 7,8x14,7 --interleave 9)
trainsim_cli_error(plan_pp_layers_fix_pp "--pp-layers = 7,8x14,7: has 16 stages but --fix pp=8"
  plan --model llama3-405b --cluster dgx-h100 --num-gpus 8192 --global-batch 2048 --pp-layers 7,8x14,7 --fix pp=8)
trainsim_cli_error(sweep_pp_layers_vary_pp "has 16 entries, must have one per pipeline stage \\(pp = 8\\)"
  sweep ${LLAMA405} --pp-layers 7,8x14,7 --vary pp --values 16,8)

# Calibration from the recorded H200 measurements (no GPU needed): fit on one set of shapes,
# compare on a different (held-out) set. The issue's target is a calibrated mean error of at
# most 10%; the recorded run (2026-11-29, run 6: validate/results/fixtures/h200-calibration.json and
# h200-held-out.json) gives 8.6% (datasheet 15.7%) over 48 cases. The limit is the target.
add_test(NAME cli.calibrate_recorded
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 0 "gemm tile [0-9]+x[0-9]+" $<TARGET_FILE:trainsim> calibrate --from ${PROJECT_SOURCE_DIR}/validate/results/fixtures/h200-calibration.json
                 --base h200-datasheet --out ${CMAKE_CURRENT_BINARY_DIR}/h200-test-profile.json)
set_tests_properties(cli.calibrate_recorded PROPERTIES FIXTURES_SETUP h200_profile)
add_test(NAME cli.compare_heldout
         COMMAND trainsim compare --calibration ${CMAKE_CURRENT_BINARY_DIR}/h200-test-profile.json
                 --measurements ${PROJECT_SOURCE_DIR}/validate/results/fixtures/h200-held-out.json
                 --base h200-datasheet --max-mape-pct 10)
# Exit code 3 above the limit fails this test (no output pattern: ctest then checks the code).
set_tests_properties(cli.compare_heldout PROPERTIES FIXTURES_REQUIRED h200_profile)

# Collective model from the recorded 2x H200 run (2026-11-29, NVLink NV18, NCCL 2.28.3, mpirun -np
# 2; validate/results/fixtures/collectives-h200x2-mpi.json), no GPU needed: fit the regimes, then compare
# every measured size. Issue #7's target: within 15% at every size >= 1 MiB. Five ops meet it
# (max 12.4%, all-gather at 4 GiB). all-to-all does not: its 16 MiB point (89.7 us, slower than
# the 81.8 us at 32 MiB; 50.1 us in the single-process run) is an outlier of that run, and the
# fit reaches 24.9% there. Its guard is that figure rounded up to 25%, a regression bound,
# not the target (docs/collectives.md, "2x H200 (NVLink), 2026-11-29").
add_test(NAME cli.calibrate_collectives_recorded
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 0 "all-reduce intra-node P=2: [1-3] regimes?: from 0 B"
                 $<TARGET_FILE:trainsim> calibrate
                 --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json
                 --topology ${PROJECT_SOURCE_DIR}/validate/results/fixtures/h200x2-topology.txt
                 --base h200 --out ${CMAKE_CURRENT_BINARY_DIR}/h200x2-test-profile.json)
set_tests_properties(cli.calibrate_collectives_recorded PROPERTIES FIXTURES_SETUP h200x2_profile)
set(H200X2_COMPARE trainsim compare --calibration ${CMAKE_CURRENT_BINARY_DIR}/h200x2-test-profile.json
                   --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json)
add_test(NAME cli.compare_collectives_recorded
         COMMAND ${H200X2_COMPARE} --ops all-reduce,all-gather,reduce-scatter,broadcast,send-recv
                 --max-error-above-1mib-pct 15)
add_test(NAME cli.compare_collectives_recorded_all_to_all
         COMMAND ${H200X2_COMPARE} --ops all-to-all --max-error-above-1mib-pct 25)
# The guard can fail: exit 3 with the figure and the limit.
add_test(NAME cli.compare_collectives_guard
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 3 "max \\|error\\| [0-9.]+% above 1 MiB > 5.0%"
                 $<TARGET_FILE:trainsim> compare --calibration ${CMAKE_CURRENT_BINARY_DIR}/h200x2-test-profile.json
                 --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json
                 --max-error-above-1mib-pct 5)
set_tests_properties(cli.compare_collectives_recorded cli.compare_collectives_recorded_all_to_all
                     cli.compare_collectives_guard PROPERTIES FIXTURES_REQUIRED h200x2_profile)
# The committed preset is that fit: the same bounds hold for it.
add_test(NAME cli.compare_collectives_preset
         COMMAND trainsim compare --calibration h200-x2-nvlink
                 --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json
                 --ops all-reduce,all-gather,reduce-scatter,broadcast,send-recv
                 --max-error-above-1mib-pct 15)
trainsim_cli_test(calibrate_topology "GPU0<->GPU1 NV18"
  calibrate --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json
  --topology ${PROJECT_SOURCE_DIR}/validate/results/fixtures/h200x2-topology.txt --base h200
  --out ${CMAKE_CURRENT_BINARY_DIR}/h200x2-topology-profile.json --format json)
trainsim_cli_error(calibrate_bad_topology "--topology .*no GPU rows"
  calibrate --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json
  --topology ${CMAKE_CURRENT_SOURCE_DIR}/testdata/bad.json --base h200
  --out ${CMAKE_CURRENT_BINARY_DIR}/unused-profile.json)
trainsim_cli_error(calibrate_max_regimes "--max-regimes = 4: must be 1, 2 or 3"
  calibrate --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json
  --base h200 --max-regimes 4 --out ${CMAKE_CURRENT_BINARY_DIR}/unused-profile.json)
trainsim_cli_error(compare_bad_ops "--ops = 'all-sum': unknown collective"
  compare --calibration h200-x2-nvlink --ops all-sum
  --collectives ${PROJECT_SOURCE_DIR}/validate/results/fixtures/collectives-h200x2-mpi.json)
trainsim_cli_error(calibrate_bad_file "measurements" calibrate --from ${CMAKE_CURRENT_SOURCE_DIR}/testdata/unknown_field.json --out x.json)
# fp8 is a cuBLASLt GEMM only, at multiples of 16: rejected from the flags, before any device.
trainsim_cli_error(bench_fp8_op "--dtype fp8: only --op gemm runs in fp8, not --op relu"
  bench kernels --op relu --dtype fp8)
trainsim_cli_error(bench_fp8_shape "--m 40 --n 64 --k 64: must all be multiples of 16"
  bench kernels --op gemm --dtype fp8 --m 40 --n 64 --k 64)
trainsim_cli_error(bench_fp8_cublas "--gemm-impl cublas has no fp8 path"
  bench kernels --op gemm --dtype fp8 --gemm-impl cublas)
# Hostile model names, GPU preset names and --plot paths never run a command (every plotting
# command; needs gnuplot, which the quick start installs).
add_test(NAME cli.plot_injection
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/plot_injection.sh $<TARGET_FILE:trainsim>)
trainsim_cli_error(plot_extension "must end in .png or .svg" memory --model gpt2 --gpu h100-sxm --plot out.pdf)
trainsim_cli_error(recompute_selective_op_megatron "--recompute selective-op: torchtitan's per-op checkpointing is a PyTorch framework's option" estimate --model gpt2 --gpu h100-sxm --recompute selective-op --framework megatron)
trainsim_cli_error(recompute_selective_op_train_step "--recompute selective-op: torchtitan's per-op checkpointing is not in our trainer" train-step --model cs336-small --recompute selective-op)
# Every model field can be overridden by a flag (GPT-2 untied: 124,439,808 + 50257 x 768).
trainsim_cli_test(model_override_untied "\"total\": 163037184"
  model --model gpt2 --tied-embeddings false --format json)
trainsim_cli_error(model_override_norm "--norm = batchnorm: must be layernorm or rmsnorm"
  model --model gpt2 --norm batchnorm)
trainsim_cli_error(sweep_zero_gpus "num-gpus = 0: must be positive"
  sweep --model gpt2 --gpu a100-80g --seq-len 1024 --vary num-gpus --values 0,8)
trainsim_cli_error(zero_gpus "--num-gpus = 0: must be in 1..10000000" estimate --model gpt2 --gpu a100-80g --seq-len 1024 --num-gpus 0)

# train-step --predict-only: trainsim's side of the training-step comparison, without a GPU.
trainsim_cli_test(train_step_predict_only "\"step\": \\{\n *\"predicted_s\": 0\\.0[0-9]+"
  train-step --model cs336-small --predict-only --format json)

# Recorded training steps (validate/results/fixtures, 2026-11-29 on H200s) re-predicted with the
# committed profiles, no GPU needed. Issue target: step time within 10%, peak memory within 5%.
# One GPU (20 runs, small..2.7B, fp32 and bf16-mixed, recompute none and full): max 7.2%.
add_test(NAME cli.compare_train_step_single
         COMMAND trainsim compare --calibration h200
                 --train-step ${PROJECT_SOURCE_DIR}/validate/results/fixtures/h200-train-step.jsonl
                 --max-step-error-pct 10)
# Two GPUs (18 runs: every DDP variant, buckets 1..1000 MiB, ZeRO-1, accumulation): max 11.0%,
# at cs336-xl with gradient accumulation 2 (docs/train-step.md): the 10% target is NOT met
# there; the bound is a regression guard at the recorded figure plus one point.
add_test(NAME cli.compare_train_step_dp
         COMMAND trainsim compare --calibration h200-x2-nvlink
                 --train-step ${PROJECT_SOURCE_DIR}/validate/results/fixtures/h200x2-dp-train-step.jsonl
                 --max-step-error-pct 12)
# Four configurations first run after the model changes (out of sample): max 5.5%.
add_test(NAME cli.compare_train_step_confirm
         COMMAND trainsim compare --calibration h200-x2-nvlink
                 --train-step ${PROJECT_SOURCE_DIR}/validate/results/fixtures/h200x2-confirm-train-step.jsonl
                 --max-step-error-pct 10)
trainsim_cli_error(compare_train_step_bad_line "bad_train_step.jsonl line 3: batch_size = -4: must be an integer in 1"
  compare --calibration h200 --train-step ${CMAKE_CURRENT_SOURCE_DIR}/testdata/bad_train_step.jsonl)

# Issue 18 (hardening): every row of its table gives a clear error or a correct result.
set(TD ${CMAKE_CURRENT_SOURCE_DIR}/testdata)
# Row 2: a bucket of 1e-6 MiB (was bad_alloc, exit 2).
trainsim_cli_error(bucket_tiny "--bucket-mb = 1e-06: must be in \\[0.001, 100000\\] MiB"
  estimate --model gpt2 --gpu a100-80g --bucket-mb 1e-6)
trainsim_cli_error(memory_bucket_tiny "--bucket-mb = 1e-06: must be in"
  memory --model gpt2 --gpu a100-80g --bucket-mb 1e-6)
# Row 3: a sweep factor that hangs or prints 20,112 rows.
trainsim_cli_error(collective_factor_rows "--factor = 1.001: 20112 sizes from 8 to 4G; at most 1000"
  collective --gpu h200 --sweep --factor 1.001)
trainsim_cli_error(collective_factor_hang "--factor = 1.0000001: 201012693 sizes"
  collective --gpu h200 --sweep --factor 1.0000001)
string(REPEAT ",1" 1000 SWEEP_1001_VALUES)
trainsim_cli_error(sweep_values_count "--values: more than 1000 values"
  sweep --model gpt2 --gpu a100-80g --vary micro-batch --values "1${SWEEP_1001_VALUES}")
# Row 4: GPU presets with a peak of 1e308 TFLOP/s or a bandwidth of 1e-300 GB/s (printed -nan).
trainsim_cli_error(gpu_peak_1e308 "peak_tflops.bf16 = 1e\\+308: must be 0 or in \\[0.01, 100000\\] TFLOP/s"
  estimate --model gpt2 --gpu ${TD}/gpu_peak_1e308.json)
trainsim_cli_error(gpu_bandwidth_1e-300 "hbm_bandwidth_gb_per_s = 1e-300: must be in \\[1, 1e\\+06\\] GB/s"
  estimate --model gpt2 --gpu ${TD}/gpu_bandwidth_1e-300.json)
# Row 6: plan with GPT-2's 1024 learned positions: the default sequence fits them, and an
# explicit longer one is refused by plan as by estimate.
trainsim_cli_test(plan_gpt2_default_seq "\"feasible\": [1-9][0-9]*,"
  plan --model gpt2 --gpu a100-80g --global-batch 64 --format json)
trainsim_cli_error(plan_gpt2_long_seq "seq_len exceeds the model's learned positions: [0-9]+"
  plan --model gpt2 --gpu a100-80g --global-batch 64 --seq-len 2048)
trainsim_cli_error(estimate_gpt2_long_seq "seq_len = 2048: exceeds the model's learned positions"
  estimate --model gpt2 --gpu a100-80g --seq-len 2048)
# Row 7: silently accepted numbers.
trainsim_cli_error(usd_nan "--usd-per-gpu-hour = nan: must be a finite number"
  time --params 7e9 --tokens 1T --gpu h100-sxm --usd-per-gpu-hour nan)
trainsim_cli_error(usd_negative "--usd-per-gpu-hour = -1: must be in \\[0, 1e\\+06\\] USD"
  time --params 7e9 --tokens 1T --gpu h100-sxm --usd-per-gpu-hour -1)
trainsim_cli_error(plan_threads "--threads = -1: must be in 0..1024"
  plan --model gpt2 --gpu a100-80g --global-batch 64 --threads -1)
trainsim_cli_error(plan_max_tp "--max-tp = -1: must be in 0..65536"
  plan --model gpt2 --gpu a100-80g --global-batch 64 --max-tp -1)
trainsim_cli_test(plan_explain "ZeRO 3 -> 2 +[0-9.]+ +[+-][0-9.]+% +slower"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 16 --global-batch 128 --seq-len 8192
  --explain 1 --top 1)
trainsim_cli_error(plan_explain_zero "--explain = 0: must be in 1..10000"
  plan --model gpt2 --gpu a100-80g --global-batch 64 --explain 0)
trainsim_cli_error(plan_fix_twice "--fix tp=4: tp is already fixed by --fix tp=8"
  plan --model gpt2 --gpu a100-80g --global-batch 64 --fix tp=8 --fix tp=4)
trainsim_cli_error(mfu_tiny "--mfu = 1e-300: must be in \\[0.001, 1\\]"
  time --params 7e9 --tokens 1T --gpu h100-sxm --mfu 1e-300)
trainsim_cli_error(train_step_bucket "--bucket-mb = 1e\\+308: must be in"
  train-step --predict-only --model cs336-small --bucket-mb 1e308)
trainsim_cli_error(mfu_inf "--mfu = inf: must be a finite number"
  time --params 7e9 --tokens 1T --gpu h100-sxm --mfu inf)
trainsim_cli_error(dp_negative "--dp = -3: must be positive"
  estimate --model gpt2 --gpu a100-80g --dp -3)
# Row 8: one default sequence length (2048, or the model's positions when fewer), and 0 refused.
trainsim_cli_error(model_seq_zero "seq_len = 0: must be positive" model --model llama3-8b --seq-len 0)
trainsim_cli_test(model_default_seq "\"seq_len\": 2048" model --model llama3-405b --format json)
trainsim_cli_test(time_default_seq "\"seq_len\": 2048"
  time --model llama3-405b --tokens 1T --gpu h100-sxm --format json)
trainsim_cli_test(estimate_default_seq_gpt2 "\"seq_len\": 1024"
  estimate --model gpt2 --gpu a100-80g --format json)
# Row 9: roofline refuses a dtype the GPU lacks, as time does.
trainsim_cli_error(roofline_fp8_v100 "--dtype = fp8: v100 has no fp8 peak"
  roofline --gpu v100 --dtype fp8 --op gemm --m 1024 --n 1024 --k 1024)
# FP8 training on a GPU without FP8 units is refused, not emulated (found by cli_property's
# long run: --precision fp8 on an A100 ran FP8 GEMMs at the fp32 rate).
trainsim_cli_error(precision_fp8_a100 "--precision = fp8: a100-80g has no FP8 tensor cores"
  estimate --model llama3-8b --gpu a100-80g --num-gpus 8 --precision fp8)
trainsim_cli_error(precision_mxfp8_h100 "--precision = mxfp8: h100-sxm has no per-block"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 8 --global-batch 64 --precision mxfp8)
trainsim_cli_error(precision_fp8_memory_v100 "--precision = fp8-cs: v100 has no FP8"
  memory --model llama3-8b --gpu v100 --precision fp8-cs)
trainsim_cli_test(precision_fp8_mfu_of_fp8_peak "MFU [0-9.]+%  HFU [0-9.]+% \\(of the fp8 peak\\)"
  estimate --model llama3-8b --cluster dgx-h100 --num-gpus 8 --tp 2 --global-batch 64 --precision fp8)
# An fp32 MFU above 100% says why (found by cli_property's long run, seed 2929: PyTorch's fp32
# attention runs on TF32 tensor cores, and model FLOPs count the whole attention square).
trainsim_cli_test(mfu_above_peak_says_why "MFU 1[0-9][0-9]\\.[0-9]%[^\n]*\nnote: an MFU or HFU above 100% is possible at long sequences in fp32"
  estimate --model cs336-small --gpu b200 --num-gpus 1 --seq-len 32768 --precision fp32 --framework pytorch)
# Row 10: one clear message each.
trainsim_cli_error(hf_no_model_type "hf_no_model_type.json: model_type: missing: a Hugging Face config.json"
  model --model ${TD}/hf_no_model_type.json)
trainsim_cli_error(model_directory "--model = .*testdata: is a directory, expected a JSON file"
  model --model ${TD})
trainsim_cli_error(unknown_command "unknown command 'frobnicate'; the commands are: model, time"
  frobnicate)
trainsim_cli_error(unknown_command_near "did you mean 'estimate'" estimat)
# Found by fuzz_cli: an empty positional made CLI11 loop forever; refused up front.
# (add_test keeps the empty argument, which a function's ARGN would drop.)
add_test(NAME cli.error.empty_argument
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 1 "argument 2 is empty" $<TARGET_FILE:trainsim> time "" --params 7e9
                 --tokens 1T --gpu h100-sxm)
set_tests_properties(cli.error.empty_argument PROPERTIES TIMEOUT 10)
# Row 11: a cluster of other GPUs is refused, not silently built.
trainsim_cli_error(cluster_other_gpu "--gpu = a100-80g: the cluster dgx-h100 is built of h100-sxm"
  estimate --model gpt2 --gpu a100-80g --cluster dgx-h100)
trainsim_cli_test(cluster_own_gpu "dgx-h100" estimate --model gpt2 --gpu h100-sxm --cluster dgx-h100)
# Row 12: input files above 16 MiB are refused before parsing (a sparse file: no disk written).
add_test(NAME cli.error.input_too_large
         COMMAND bash -c "truncate -s 17M big.json && out=$($<TARGET_FILE:trainsim> model --model ./big.json 2>&1); rc=$?; rm -f big.json; echo \"$out\"; [ $rc -eq 1 ] && grep -q 'big.json: is 17.0 MiB: input files are limited to 16 MiB' <<< \"$out\""
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
# A capacity override obeys the presets' range for memory_gb.
trainsim_cli_error(gpu_memory_override "--gpu-memory-gb: memory_gb = 10000000: must be in \\[0.1, 100000\\] GB"
  estimate --model gpt2 --gpu h100-sxm --gpu-memory-gb 1e7)

# Model coverage (issue 17): the new presets and Hugging Face model types load and count.
trainsim_cli_test(model_deepseek_v3 "\"mtp\": 11610068224"
  model --model deepseek-v3 --seq-len 4096 --format json)
trainsim_cli_test(model_hf_gpt_oss "\"total\": 20914757184"
  model --model ${PROJECT_SOURCE_DIR}/model/testdata/hf/gpt-oss-20b.json --format json)
trainsim_cli_test(estimate_moe_ep "ep_comm \\+ MoE dispatch \\(exposed\\) +344\\.35 +41\\.2%"
  estimate --model qwen3-30b-a3b --cluster dgx-h100 --num-gpus 16 --ep 8 --seq-len 4096
           --moe-imbalance 1.2)
trainsim_cli_error(moe_imbalance_below_one "moe_imbalance_factor = 0.5: must be in \\[1, 1024\\]"
  estimate --model mixtral-8x7b --gpu h100-sxm --num-gpus 8 --ep 8 --moe-imbalance 0.5)
trainsim_cli_error(hf_unsupported_feature "mlp_only_layers = \\[3\\]: not supported"
  model --model ${CMAKE_CURRENT_SOURCE_DIR}/testdata/qwen3_moe_mlp_only.json)

# Framework profiles: every output names its framework; the recorded runs are compared per
# half; the presets are exactly what the declared fit produces from the recorded runs.
trainsim_cli_test(framework_named "framework: pytorch\n.*total +51\\.28 +100\\.0%"
  estimate --model cs336-small --gpu h200 --num-gpus 1 --micro-batch 4 --seq-len 512 --framework pytorch)
# deepspeed: no measured run checks it; every estimate and plan says its step is a lower bound.
trainsim_cli_test(framework_deepspeed_caveat "step 500\\.26 ms \\(no error band: the deepspeed profile has no fit residuals.*caveat \\(deepspeed\\): no DeepSpeed run was measured.*lower bound"
  estimate --model llama3-8b --cluster dgx-h100 --num-gpus 8 --framework deepspeed --zero 3 --micro-batch 1 --seq-len 4096 --recompute full)
trainsim_cli_test(plan_deepspeed_caveat "framework deepspeed.*\n1 +1 +1 +8 +1 +2 +4 +3 +none +off +1 +0\\.322 +42\\.3% +18\\.3\n.*caveat \\(deepspeed\\): no DeepSpeed run was measured"
  plan --model llama3.2-1b --cluster dgx-h100 --num-gpus 8 --framework deepspeed --seq-len 2048 --global-batch 64 --top 3)
# The parallelisms a framework runs (presets/frameworks/*.json "parallelisms"): eager PyTorch's
# DDP is data parallelism only; DeepSpeed's pipeline engine refuses ZeRO-2/3, and it has no ring
# context parallelism. plan searches only what the framework runs, and says so.
trainsim_cli_error(framework_pytorch_tp "--tp 2: --framework pytorch runs data parallelism only, not tensor parallelism: eager PyTorch"
  estimate --model llama3.2-1b --cluster dgx-h100 --num-gpus 8 --framework pytorch --tp 2 --seq-len 2048)
trainsim_cli_error(framework_deepspeed_pp_zero3 "--pp 2 with ZeRO-3: --framework deepspeed runs pipeline parallelism only with ZeRO stages 0, 1: PipelineModule"
  memory --model llama3-70b --cluster dgx-h100 --num-gpus 8 --seq-len 4096 --pp 2 --recompute full
  --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_zero3_offload.json)
trainsim_cli_error(framework_deepspeed_cp "--cp 2: --framework deepspeed runs data, tensor, pipeline and expert parallelism .*not context parallelism: DeepSpeed's long-sequence parallelism is DeepSpeed-Ulysses"
  sweep --model llama3.2-1b --cluster dgx-h100 --num-gpus 8 --framework deepspeed --seq-len 8192 --vary cp --values 1,2)
trainsim_cli_error(plan_fix_interleave_deepspeed "--fix: --interleave 2: --framework deepspeed runs pipelines without interleaving: PipelineModule"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 16 --framework deepspeed --seq-len 4096 --global-batch 64 --fix interleave=2)
trainsim_cli_error(plan_fix_tp_pytorch "--fix: --tp 2: --framework pytorch runs data parallelism only"
  plan --model llama3.2-1b --cluster dgx-h100 --num-gpus 8 --framework pytorch --seq-len 2048 --global-batch 64 --fix tp=2)
trainsim_cli_test(plan_framework_layouts "layouts: --framework deepspeed runs data, tensor, pipeline and expert parallelism \\(tensor with ZeRO 0, 1, 2; pipeline with ZeRO 0, 1 and without interleaving\\).*rejected, the framework runs that layout with other ZeRO stages"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 16 --framework deepspeed --seq-len 4096 --global-batch 64 --top 3)
# A profile with no fit residuals (deepspeed) has no band: compare says so, not "0% inside".
trainsim_cli_test(compare_no_band "deepspeed/fit: 1 runs, time mean \\|error\\| [0-9.]+%, worst [0-9.]+%, no band \\(the profile has no fit residuals\\)"
  compare --framework-runs ${CMAKE_CURRENT_SOURCE_DIR}/testdata/records-no-band.jsonl)
trainsim_cli_test(framework_host_bound "host \\(CPU-bound\\) +39\\.16 +76\\.4%"
  estimate --model cs336-small --gpu h200 --num-gpus 1 --micro-batch 4 --seq-len 512 --framework pytorch)
trainsim_cli_test(framework_host_json "\"host_issue_s\": \\{[^}]*\"backward\": [0-9.e-]+,[^}]*\"optimizer\""
  estimate --model cs336-small --gpu h200 --num-gpus 1 --micro-batch 4 --seq-len 512 --framework fsdp --format json)
trainsim_cli_test(framework_band_json "\"step_time_s_high\": 0\\.23203[0-9]*,\\s+\"step_time_s_low\": 0\\.18837[0-9]*,"
  estimate --model llama3-8b --cluster dgx-h100 --num-gpus 8 --zero 1 --framework megatron --format json)
trainsim_cli_test(framework_fp8 "fp8"
  estimate --model llama3-8b --cluster dgx-h100 --num-gpus 8 --zero 1 --precision fp8)
trainsim_cli_error(framework_unknown "unknown framework preset"
  estimate --model gpt2 --gpu h100-sxm --seq-len 1024 --framework megatorn)
trainsim_cli_test(framework_runs_compare "pytorch/test: 15 runs"
  compare --framework-runs ${PROJECT_SOURCE_DIR}/validate/results/runs-2026-12-02/runs-a.jsonl --only pytorch)
trainsim_cli_test(framework_runs_published_by_precision "megatron/test fp8: [0-9]+ runs, time mean"
  compare --framework-runs ${PROJECT_SOURCE_DIR}/validate/published/data/nvidia-megatron-bridge.jsonl
  --framework-runs ${PROJECT_SOURCE_DIR}/validate/published/data/nvidia-nemo.jsonl)
trainsim_cli_test(framework_runs_oom "fsdp/test: [^\n]*OOM boundary: max micro-batch exact 3/3, within one 3/3.*pytorch-compile/fit: [^\n]*exact 1/3, within one 2/3.*pytorch/fit: [^\n]*exact 8/12, within one 12/12.*pytorch/test: [^\n]*exact 9/9, within one 9/9"
  compare --framework-runs ${PROJECT_SOURCE_DIR}/validate/results/runs-2026-12-02/oom.jsonl)
trainsim_cli_test(framework_runs_recompute_boundary "recompute boundary: least layers recomputed exact [0-9]/2, within one [0-9]/2, mean \\|difference\\| [0-9.]+ layers"
  compare --framework-runs ${PROJECT_SOURCE_DIR}/validate/results/runs-2026-12-04/recompute-boundary/recompute-boundary.jsonl)
trainsim_cli_error(framework_runs_needs_framework "--framework: required"
  calibrate --framework-runs ${PROJECT_SOURCE_DIR}/validate/results/runs-2026-12-02/runs-a.jsonl --out fw.json)
# The caching-allocator model against PyTorch's own traces: the worst reserved error is the
# guard (exit 3 above 3%); a malformed trace names file:line.
set(ALLOC_TRACES ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces)
trainsim_cli_test(allocator_traces "reserved: mean \\|error\\| [0-9.]+%, worst [0-2]\\.[0-9]% \\(3 traces\\)"
  compare --allocator-traces ${ALLOC_TRACES}/pytorch-cs336-xl-bf16-mixed-flash-none-b4-s512.trace.gz
  ${ALLOC_TRACES}/pytorch-cs336-small-bf16-mixed-naive-none-b4-s512.trace.gz
  ${ALLOC_TRACES}/pytorch-llama3.2-1b-bf16-mixed-flash-selective-b4-s4096.trace.gz
  --max-reserved-error-pct 3)
trainsim_cli_test(kernel_profiles "GPU time: mean \\|error\\| [0-9.]+%, worst [0-9.]+% \\(2 profiles\\)"
  compare --kernel-profiles ${PROJECT_SOURCE_DIR}/validate/results/kernel-profiles-2026-12-02/pytorch-cs336-small-bf16-mixed-flash-none-b32-s512.json
  ${PROJECT_SOURCE_DIR}/validate/results/kernel-profiles-2026-12-02/fsdp-cs336-xl-bf16-mixed-flash-none-b2-s1024.json)
trainsim_cli_error(kernel_profile_not_one "gpu_busy_s: missing or not a positive number"
  compare --kernel-profiles ${PROJECT_SOURCE_DIR}/presets/frameworks/pytorch.json)
# As the OOM probes run a step (the cache emptied after the model is built), PyTorch's own
# traced b197 requests get past the request that failed in the traced process.
trainsim_cli_test(allocator_trace_empty_cache "78\\.40 GB +78\\.40 GB +\\+0\\.0% +80 GB +out of memory +out of memory +serves the failed request"
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-capped/fsdp-cs336-medium-bf16-mixed-flash-full-b197-s2048-cap80.trace.gz
  --empty-cache-at-start)
trainsim_cli_error(allocator_trace_empty_cache_no_cap "--empty-cache-at-start: needs a cap"
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces/fsdp-cs336-medium-bf16-mixed-flash-full-b77-s2048.trace.gz
  --empty-cache-at-start)
trainsim_cli_error(allocator_trace_malformed "allocator_bad.trace:1: .*a line is"
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/cli/testdata/allocator_bad.trace)
add_test(NAME cli.framework_presets_are_the_fit
         COMMAND bash -c "set -e; out=$(mktemp -d); trap 'rm -rf $out' EXIT; ${PROJECT_SOURCE_DIR}/scripts/fit-frameworks.sh $<TARGET_FILE:trainsim> $out; n=0; for f in $out/*.json; do cmp $f ${PROJECT_SOURCE_DIR}/presets/frameworks/$(basename $f); n=$((n + 1)); done; test $n -eq 5")
trainsim_cli_test(memory_framework_keys "\"peak_allocated_bytes\": 47618434591\\.[0-9]*,\\s+\"peak_reserved_bytes\": 50354399775\\."
  memory --model llama3.2-1b --gpu h200 --num-gpus 1 --micro-batch 4 --seq-len 2048 --framework pytorch --format json)
trainsim_cli_test(memory_verdict_band "band \\+-[0-9]+% \\(1 sigma over"
  memory --model llama3.2-1b --gpu h200 --num-gpus 1 --micro-batch 4 --seq-len 2048 --framework pytorch)
trainsim_cli_test(memory_deepspeed_offload "DeepSpeed ZeRO-3 \\(offload optimizer: cpu, parameters: cpu\\): model states per GPU 1.88 GB"
  memory --model llama3-70b --cluster dgx-h100 --num-gpus 8 --seq-len 4096 --recompute full
  --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_zero3_offload.json)
# AutoTP (tensor_parallel.autotp_size) sets tp; with ZeRO-3 DeepSpeed does not run it.
trainsim_cli_test(memory_deepspeed_autotp "tp 4 pp 1 dp 2 cp 1, ZeRO-2.*DeepSpeed's estimator on each rank's 1/4 tensor-parallel shard"
  memory --model llama3-8b --cluster dgx-h100 --num-gpus 8 --seq-len 4096
  --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_zero2_autotp.json)
trainsim_cli_error(memory_deepspeed_autotp_zero3 "ds_zero3_autotp.json \\(zero_optimization.stage 3, tensor_parallel.autotp_size 2\\): --tp 2 with ZeRO-3: --framework deepspeed runs tensor parallelism only with ZeRO stages 0, 1, 2"
  memory --model llama3-8b --cluster dgx-h100 --num-gpus 8 --seq-len 4096
  --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_zero3_autotp.json)
trainsim_cli_error(memory_deepspeed_autotp_tp_clash "--tp 2: the DeepSpeed config .*ds_zero2_autotp.json sets tensor_parallel.autotp_size = 4; give one"
  memory --model llama3-8b --cluster dgx-h100 --num-gpus 8 --seq-len 4096 --tp 2
  --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_zero2_autotp.json)
trainsim_cli_error(memory_deepspeed_unknown_key "zero_optimization.stage3_flux: not modelled by trainsim"
  memory --model gpt2 --gpu h100-sxm --seq-len 1024 --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_unknown.json)
# DeepSpeed's batch rule: 64 = micro x 4 steps x dp 8 gives micro-batch 2; 100 != 4 x 4 x 8.
trainsim_cli_test(memory_deepspeed_batch_derived "DeepSpeed batch: train_batch_size 64 = micro-batch 2 x 4 accumulation steps x dp 8"
  memory --model gpt2 --cluster dgx-h100 --num-gpus 8 --seq-len 1024
  --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_zero2_train_batch.json)
trainsim_cli_error(memory_deepspeed_batch_mismatch "train_batch_size \\(100\\) must equal train_micro_batch_size_per_gpu \\(4\\) x gradient_accumulation_steps \\(4\\) x data-parallel size \\(8\\)"
  memory --model gpt2 --cluster dgx-h100 --num-gpus 8 --seq-len 1024
  --deepspeed ${CMAKE_CURRENT_SOURCE_DIR}/testdata/ds_batch_mismatch.json)

# Docs that run: every figure block of README.md and docs/*.md is the output of the command in
# its marker, and every command they show runs (scripts/docs-run.sh; `update` regenerates).
# Every example in every --help runs (GPU ones skipped), and a figure it promises is printed.
add_test(NAME cli.help_examples
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/docs-run.sh help $<TARGET_FILE:trainsim>)
add_test(NAME cli.docs_run
         COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/docs-run.sh check $<TARGET_FILE:trainsim>
                 ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/collectives.md
                 ${PROJECT_SOURCE_DIR}/docs/frameworks.md ${PROJECT_SOURCE_DIR}/docs/kernels.md
                 ${PROJECT_SOURCE_DIR}/docs/model.md ${PROJECT_SOURCE_DIR}/docs/notes.md
                 ${PROJECT_SOURCE_DIR}/docs/plan.md ${PROJECT_SOURCE_DIR}/docs/train-step.md
                 ${PROJECT_SOURCE_DIR}/docs/validation.md)
# Further passes of recorded runs need the runs they repeat.
trainsim_cli_error(repeat_runs_alone "--repeat-runs: needs --framework-runs"
  compare --repeat-runs ${PROJECT_SOURCE_DIR}/validate/results/runs-2026-12-02/runs-f.jsonl)

# A kernel profile split by kind of kernel (the profile's kernels by name): cuDNN's SDPA and its
# fused pre/post kernels are attention, 2.43 + 6.32 + 0.45 + 0.38 ms per step in this profile.
trainsim_cli_test(compare_kernel_profiles_by_kind "\"attention_measured_s\": 0\\.00957"
  compare --kernel-profiles
  ${PROJECT_SOURCE_DIR}/validate/results/kernel-profiles-2026-12-02/pytorch-cs336-large-bf16-mixed-flash-none-b2-s2048.json
  --format json)

# A recorded trace replayed under an allocator cap: FSDP2 cs336-medium, full recompute, micro-batch
# 77 x 2048 reserved 38.76 GB uncapped; the model needs 36.7 GB once its cache is returned.
trainsim_cli_test(compare_allocator_trace_under_cap "\"cap_bytes\": 40000000000,[^}]*\"fits_under_cap\": true,[^}]*\"model_peak_reserved_bytes\": 38761660416\\.0"
  compare --allocator-traces ${ALLOC_TRACES}/fsdp-cs336-medium-bf16-mixed-flash-full-b77-s2048.trace.gz
  --allocator-cap-gb 40 --format json)
trainsim_cli_test(compare_allocator_trace_over_cap "38\\.76 GB +38\\.76 GB +\\+0\\.0% +30 GB +out of memory"
  compare --allocator-traces ${ALLOC_TRACES}/fsdp-cs336-medium-bf16-mixed-flash-full-b77-s2048.trace.gz
  --allocator-cap-gb 30)
trainsim_cli_error(allocator_cap_negative "--allocator-cap-gb = -1: must be in \\[0, 1e6\\]"
  compare --allocator-traces ${ALLOC_TRACES}/fsdp-cs336-medium-bf16-mixed-flash-full-b77-s2048.trace.gz
  --allocator-cap-gb -1)

# A trace recorded under its cap (eager cs336-large, naive attention, full recompute, micro-batch
# 46 at 40 GB, which ran; a test pair, recorded in session 12 and used for no development):
# replayed under that cap it fits as PyTorch's did; trainsim's own generated step for that
# configuration (--with-prediction) reserves 41.75 GB and does not fit (the known miss above).
set(CAPPED_TRACES ${PROJECT_SOURCE_DIR}/validate/results/fixtures/allocator-traces-capped)
trainsim_cli_test(compare_allocator_trace_recorded_cap
  "\"fits_under_cap\": true,[^}]*\"measured_fits_under_cap\": true,[^}]*\"measured_peak_reserved_bytes\": 39998980096\\.0,[^}]*\"predicted_fits_under_cap\": false,[^}]*\"predicted_peak_reserved_bytes\": 41754296320\\.0"
  compare --allocator-traces ${CAPPED_TRACES}/pytorch-cs336-large-bf16-mixed-naive-full-b46-s1024-cap40.trace.gz
  --with-prediction --format json)
# Two traces recorded under 24 GB that ran out of memory in their third step (eager cs336-large,
# flash, full recompute, b30 and b33): PyTorch's reserved bytes grew in the third step. The
# generated step settles by its second: it runs out of memory at b33 as PyTorch did, and fits
# at b30 (23.67 GB), where PyTorch's third step did not.
set(CAPPED2_TRACES ${PROJECT_SOURCE_DIR}/validate/results/allocator-traces-2026-12-05-capped2)
trainsim_cli_test(compare_allocator_trace_third_step
  "\"measured_fits_under_cap\": false,[^}]*\"predicted_fits_under_cap\": true,[^}]*\"predicted_peak_reserved_bytes\": 23672867159\\..*\"measured_fits_under_cap\": false,[^}]*\"predicted_fits_under_cap\": false,[^}]*\"predicted_peak_reserved_bytes\": 24823988224\\.0"
  compare --allocator-traces ${CAPPED2_TRACES}/pytorch-cs336-large-bf16-mixed-flash-full-b30-s1024-cap24.trace.gz
  ${CAPPED2_TRACES}/pytorch-cs336-large-bf16-mixed-flash-full-b33-s1024-cap24.trace.gz
  --with-prediction --format json)
trainsim_cli_error(allocator_trace_prediction_needs_config "allocator_no_config.trace: framework: missing"
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/cli/testdata/allocator_no_config.trace
  --with-prediction)

# torch.compile over the eager fsdp profile as torchtitan applies it (docs/frameworks.md):
# compiling the loss too replaces eager's fp32 chain at the loss with one 16-bit logits tensor,
# so the 8B step at micro-batch 2 x 8192 needs far less; the flag says so in the output, and a
# profile that is not eager PyTorch is refused with the flag named.
trainsim_cli_test(memory_torch_compile_blocks_and_loss
  "framework: fsdp under torch.compile \\(blocks\\+loss\\).*peak allocated 42\\.[0-9]+ GB"
  memory -m llama3.1-8b --cluster dgx-h200 -n 32 --zero 3 --framework fsdp --micro-batch 2
  -s 8192 --precision fp8 --recompute selective-op --torch-compile blocks+loss)
trainsim_cli_error(torch_compile_needs_eager_pytorch "--torch-compile blocks: torch.compile applies to the eager PyTorch profiles"
  estimate -g h200 -m llama3.1-8b --framework megatron --torch-compile blocks)
trainsim_cli_error(torch_compile_bad_value "--torch-compile = fast: must be none, blocks"
  memory -g h200 -m llama3.1-8b --framework fsdp --torch-compile fast)

# Bands by kind of run: a multi-GPU fsdp layout's memory band comes from the multi-GPU fit rows'
# memory residuals (the published torchtitan rows), one GPU's from the device runs'.
trainsim_cli_test(memory_band_multi_gpu "band \\+-[0-9]+% \\(1 sigma over 10 multi-GPU fsdp runs\\)"
  memory -m llama3.1-70b --cluster grand-teton-h100 -n 256 --tp 8 --sequence-parallel --zero 3
  --framework fsdp --micro-batch 16 -s 8192 --precision fp8 --recompute full)
trainsim_cli_test(memory_band_one_gpu "band \\+-[0-9]+% \\(1 sigma over [0-9]+ fsdp runs\\)"
  memory -m cs336-large -g h200 --framework fsdp --zero 3 --micro-batch 4 -s 1024)
# An unset --zero is the framework's default stage, said under the layout (FSDP2's
# fully_shard: ZeRO-3; Megatron's distributed optimizer: ZeRO-1); a given one wins, unsaid.
trainsim_cli_test(zero_default_fsdp "\"zero\": 3[^0-9].*\"zero_stage_note\": \"ZeRO-3: the fsdp profile's default"
  estimate --model llama3-8b --cluster dgx-h100 --num-gpus 8 --seq-len 8192 --framework fsdp --format json)
trainsim_cli_test(zero_default_megatron "ZeRO-1, recompute none.*\n# ZeRO-1: the megatron profile's default, the distributed optimizer"
  memory --model llama3-8b --cluster dgx-h100 --num-gpus 8 --seq-len 8192)
add_test(NAME cli.zero_given_wins COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 0 "\"zero\": 0[^0-9]" $<TARGET_FILE:trainsim>
         estimate --model llama3-8b --cluster dgx-h100 --num-gpus 8 --seq-len 8192 --framework fsdp
         --zero 0 --format json)
set_tests_properties(cli.zero_given_wins PROPERTIES FAIL_REGULAR_EXPRESSION "zero_stage_note")
trainsim_cli_test(zero_states_only_baseline "\"zero\": 0\n}"
  memory --params 7.5e9 --num-gpus 64 --format json)
trainsim_cli_error(zero_negative "--zero = -3: must be 0, 1, 2 or 3"
  estimate --model llama3-8b --gpu h100-sxm --zero -3)
# A ZeRO stage the framework cannot run is refused, naming the ones it can and why; `plan`
# searches only those (FSDP2 has no optimizer-only sharding: no ZeRO-1 row).
trainsim_cli_error(zero_fsdp_stage1 "--zero 1: --framework fsdp runs only ZeRO stages 0, 2, 3: FSDP2"
  estimate --model llama3-8b --cluster dgx-h100 --framework fsdp --zero 1)
trainsim_cli_error(zero_pytorch_stage3 "--zero 3: --framework pytorch runs only ZeRO stages 0, 1: .*--framework fsdp"
  memory --model llama3-8b --cluster dgx-h100 --framework pytorch --zero 3)
trainsim_cli_error(zero_plan_fix "--fix zero=1: --framework fsdp runs only ZeRO stages 0, 2, 3"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 8 --global-batch 64 --seq-len 8192 --framework fsdp --fix zero=1)
add_test(NAME cli.zero_plan_fsdp_stages COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/golden.py 0 "\"zero\": 2[^0-9]" $<TARGET_FILE:trainsim>
         plan --model llama3-8b --cluster dgx-h100 --num-gpus 8 --global-batch 64 --seq-len 8192
         --framework fsdp --top 40 --format json)
set_tests_properties(cli.zero_plan_fsdp_stages PROPERTIES FAIL_REGULAR_EXPRESSION "\"zero\": 1[^0-9]")
# Recorded files with a field of the wrong type or a number beyond a double: a named error
# (exit 1), where they were internal errors (exit 2) until session 26.
trainsim_cli_error(train_step_source_number "train_step_source_number.jsonl line 1: source: expected a string"
  compare --calibration h200 --train-step ${PROJECT_SOURCE_DIR}/cli/testdata/train_step_source_number.jsonl)
trainsim_cli_error(train_step_overflow "train_step_overflow.jsonl:1: malformed JSON.*number overflow"
  compare --calibration h200 --train-step ${PROJECT_SOURCE_DIR}/cli/testdata/train_step_overflow.jsonl)
trainsim_cli_error(kernel_profile_wall_string "kernel_profile_wall_string.json: step_wall_s: expected a number"
  compare --kernel-profiles ${PROJECT_SOURCE_DIR}/cli/testdata/kernel_profile_wall_string.json)

# Hardening: data files are untrusted input, no output destroys an input (one case per row
# group of the hardening issue; cli/tests/hostile_files.sh says what each checks).
foreach(case deep_json duplicate_key endless_runs_file names_not_paths output_is_input
             failed_command_keeps_output write_errors measurement_types run_numbers
             jsonl_positions control_characters interrupted plot_tmpdir gzip_inputs)
  add_test(NAME cli.hostile.${case}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/hostile_files.sh
                   $<TARGET_FILE:trainsim> ${PROJECT_SOURCE_DIR} ${case})
endforeach()

# Hardening: numbers, formats, modes and overrides (the rows of the hardening issue).
trainsim_cli_refuses(layers_limit "num_layers = 100000: .*10000"
  estimate --model llama3-8b --gpu h200 --num-layers 100000 --framework pytorch)
trainsim_cli_refuses(num_gpus_min_int64 "--num-gpus = -9223372036854775808: must be in 1..10000000"
  estimate --model llama3-8b --gpu h100-sxm --num-gpus=-9223372036854775808)
trainsim_cli_refuses(zero_minus_one "--zero = -1: must be 0, 1, 2 or 3"
  estimate --model llama3-8b --gpu h100-sxm --zero=-1)
trainsim_cli_refuses(int_flag_overflow "--max-seq-len = 18446744073709551616: out of range"
  model --model llama3-8b --max-seq-len 18446744073709551616)
trainsim_cli_refuses(train_step_seq_len "seq_len = 9223372036854775807: must be in 1..16777216"
  train-step --model cs336-small --predict-only --seq-len 9223372036854775807)
trainsim_cli_refuses(train_step_lr "lr = -1: must be in \\(0, 10\\]"
  train-step --model cs336-small --predict-only --lr -1)
trainsim_cli_refuses(train_step_steps "--steps = 18446744073709551616: out of range"
  train-step --model cs336-small --predict-only --steps 18446744073709551616)
trainsim_cli_refuses(plan_micro_batch_pinned "micro-batch 7: must divide the global batch 64"
  plan --model llama3-8b --gpu h100-sxm --num-gpus 8 --global-batch 64 --micro-batch 7)
trainsim_cli_refuses(plan_fix_dp_divides "--fix dp=3: must divide the 64 GPUs"
  plan --model llama3-8b --gpu h100-sxm --num-gpus 64 --global-batch 64 --fix dp=3)
trainsim_cli_refuses(roofline_model_unused "--zero: not used by roofline --model"
  roofline --gpu h200 --model llama3-8b --zero 1)
trainsim_cli_refuses(roofline_gemm_unused "--model: not used by roofline --op gemm"
  roofline --gpu h200 --op gemm --m 8 --n 8 --k 8 --model llama3-8b)
trainsim_cli_refuses(plan_explain_csv "--explain with --format csv"
  plan --model llama3-8b --gpu h100-sxm --num-gpus 8 --global-batch 64 --explain 2 --format csv)
trainsim_cli_refuses(compare_two_kinds "--allocator-traces and --framework-runs: one kind"
  compare --allocator-traces ${PROJECT_SOURCE_DIR}/cli/testdata/allocator_no_config.trace
  --framework-runs ${PROJECT_SOURCE_DIR}/validate/results/runs-2026-12-05/runs-l.jsonl)
trainsim_cli_refuses(presets_show_file_kind "say which kind of preset the file is with --kind"
  presets show ${PROJECT_SOURCE_DIR}/cli/testdata/bad.json)
trainsim_cli_test(presets_show_file_by_folder "\"hbm_bandwidth_gb_per_s\": 3350"
  presets show ${PROJECT_SOURCE_DIR}/presets/gpus/h100-sxm.json)
trainsim_cli_refuses(deepspeed_auto "bf16.enabled = \"auto\": give true or false \\(\"auto\" is filled in by the Hugging Face Trainer"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --deepspeed ${PROJECT_SOURCE_DIR}/cli/testdata/ds_auto.json)
trainsim_cli_test(mfu_peak_named "of the fp32 peak: v100 has no bf16 units, bf16 runs at fp32 speed"
  estimate --model llama3-8b --gpu v100)
trainsim_cli_test(head_dim_rederived "32 heads \\(32 kv, head_dim 128\\)"
  model --model gpt2 --hidden-size 4096 --num-heads 32)
trainsim_cli_test(explain_rank_two "ZeRO 2 -> 3 +6[.]328 +-0[.]7% +faster: plan #1, ranked above"
  plan --model llama3-8b --cluster dgx-h100 --num-gpus 64 --global-batch 512 --seq-len 8192 --explain 2)
add_test(NAME cli.hostile.formats
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/formats.sh $<TARGET_FILE:trainsim>
                 ${PROJECT_SOURCE_DIR})
add_test(NAME cli.hostile.plan_memory_agree
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/plan_memory_agree.sh
                 $<TARGET_FILE:trainsim>)
# The million-run's finding (seed 3312): an HFU above 100% in fp32 (full recompute) with an MFU
# below it now carries the note too.
trainsim_cli_test(hfu_above_peak_says_why "\"mfu_note\": \"an MFU or HFU above 100%"
  estimate --model llama3-8b --gpu gb200 --num-gpus 16 --tp 2 --pp 1 --cp 1 --zero 2 --recompute full
  --seq-len 32768 --global-batch 8 --precision fp32 --framework deepspeed --format json)
trainsim_cli_test(plan_help_global_batch "--global-batch INT +Sequences per optimizer step \\(required.*-k,--top INT=10 +Plans to print"
  plan --help)

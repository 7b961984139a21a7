# README.md's figures stated in prose (outside its `<!-- run: -->` blocks, which cli.docs_run
# checks exactly): each recomputed by a CPU command from the committed data and checked against
# the README's own value within a stated tolerance (cli/tests/figure_within.py). A tolerance is
# half a unit of the figure's last printed digit unless its comment says otherwise, so a test
# fails as soon as the README's rounded figure no longer matches what the command computes.
# When one fails, correct the prose (or the model), not the tolerance.
#
#   readme_figure(NAME EXPECT value TOL tolerance REGEX regex [OPTIONS figure_within options]
#                 COMMAND trainsim arguments...)
#
# REGEX is Python's (multi-line: '^'/'$' at line ends); write it as a bracket argument [=[...]=]
# so that it needs no CMake escapes. Its first group is the figure; OPTIONS (--all mean|sum|
# min|max|count, --abs, --expr, --matches N) fold several matches into one.
function(readme_figure name)
  cmake_parse_arguments(PARSE_ARGV 1 F "" "EXPECT;TOL;REGEX" "OPTIONS;COMMAND")
  add_test(NAME cli.readme_figure.${name}
           COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tests/figure_within.py ${F_OPTIONS}
                   ${F_EXPECT} ${F_TOL} "${F_REGEX}" $<TARGET_FILE:trainsim> ${F_COMMAND})
endfunction()

set(RF_FIXTURES ${PROJECT_SOURCE_DIR}/validate/results/fixtures)
set(RF_RUNS ${PROJECT_SOURCE_DIR}/validate/results)

# --- The table "What it computes, with the figures it reproduces" (README lines 28-40). ---
# Parameters (line 30): exact integers, tolerance 0.
readme_figure(params_llama3_8b EXPECT 8030261248 TOL 0
  REGEX [=[^params total +\S+ B +([0-9]+)$]=] COMMAND model --model llama3-8b)
readme_figure(params_gpt2 EXPECT 124439808 TOL 0
  REGEX [=[^params total +\S+ M +([0-9]+)$]=] COMMAND model --model gpt2)
readme_figure(params_llama2_7b EXPECT 6738415616 TOL 0
  REGEX [=[^params total +\S+ B +([0-9]+)$]=] COMMAND model --model llama2-7b)
readme_figure(params_mixtral EXPECT 46702792704 TOL 0
  REGEX [=[^params total +\S+ B +([0-9]+)$]=] COMMAND model --model mixtral-8x7b)
# FLOPs/token (line 31): "= Korthikanti et al. 2022 Eq. 7 exactly": 72 L h^2 + 12 L h s + 6 h V
# for L 96, h 12288, s 2048, V 50257 is 1,076,373,430,272 per token; tolerance 0 (exactly).
readme_figure(flops_gpt3_175b_eq7 EXPECT 1076373430272 TOL 0
  REGEX [=[^FLOPs/token total \(fwd \+ bwd\) +\S+ T +([0-9]+)$]=]
  COMMAND model --model gpt3-175b --seq-len 2048)
# New architectures (line 32): DeepSeek-V3's main model 671,026,419,200 (the printed total less
# the MTP module; tolerance 0), MTP 11.61B (tolerance 0.005 B), 260.64 GFLOPs/token causal with
# MTP (tolerance 0.005 GFLOPs). The main model's 250.45 GFLOPs is not printed by any command
# (model/variants_test.cpp checks it).
readme_figure(params_deepseek_v3_main EXPECT 671026419200 TOL 0
  OPTIONS --expr g1-g2
  REGEX [=[^params total +\S+ B +([0-9]+)$(?:.|\n)*^params MTP modules +\S+ B +([0-9]+)$]=]
  COMMAND model --model deepseek-v3 --seq-len 4096)
readme_figure(params_deepseek_v3_mtp EXPECT 11.61 TOL 0.005
  REGEX [=[^params MTP modules +([0-9.]+) B ]=] COMMAND model --model deepseek-v3 --seq-len 4096)
readme_figure(flops_deepseek_v3_causal_with_mtp EXPECT 260.64 TOL 0.005
  REGEX [=[^FLOPs/token total, attention over visible keys only +([0-9.]+) B ]=]
  COMMAND model --model deepseek-v3 --seq-len 4096)
# Top-down time (line 33): 6.3e24 FLOPs (tolerance 0.05e24), 143.9 days (tolerance 0.05).
set(RF_TIME time --params 70e9 --tokens 15T --gpu h100-sxm --num-gpus 1024 --mfu 0.5)
readme_figure(time_cs336_flops EXPECT 6.3e24 TOL 0.05e24
  REGEX [=[^6ND +([0-9.e+]+) ]=] COMMAND ${RF_TIME})
readme_figure(time_cs336_days EXPECT 143.9 TOL 0.05
  REGEX [=[^6ND +\S+ +([0-9.]+) ]=] COMMAND ${RF_TIME})
# Model states (line 34): 120 / 31.4 / 16.6 / 1.88 GB for ZeRO-0..3 (tolerances 0.5, 0.05,
# 0.05, 0.005 GB: each figure's printed precision).
set(RF_STATES memory --params 7.5e9 --num-gpus 64)
readme_figure(model_states_zero0 EXPECT 120 TOL 0.5
  REGEX [=[^0 \*? +\S+ +\S+ +\S+ +([0-9.]+)$]=] COMMAND ${RF_STATES})
readme_figure(model_states_zero1 EXPECT 31.4 TOL 0.05
  REGEX [=[^1 \*? +\S+ +\S+ +\S+ +([0-9.]+)$]=] COMMAND ${RF_STATES})
readme_figure(model_states_zero2 EXPECT 16.6 TOL 0.05
  REGEX [=[^2 \*? +\S+ +\S+ +\S+ +([0-9.]+)$]=] COMMAND ${RF_STATES})
readme_figure(model_states_zero3 EXPECT 1.88 TOL 0.005
  REGEX [=[^3 \*? +\S+ +\S+ +\S+ +([0-9.]+)$]=] COMMAND ${RF_STATES})
# Largest model (line 35), ZeRO-3 on 8 H100s: 40B at 16 B/param and 53.3B at 12 B/param at the
# lecture's 80 GB (tolerances 0.5 B and 0.05 B); 42.5B / 56.6B at the preset's 84.94 GB
# (tolerance 0.05 B).
set(RF_LARGEST memory --gpu h100-sxm --num-gpus 8 --max-params)
readme_figure(largest_model_80gb_16b EXPECT 40 TOL 0.5
  REGEX [=[^3 +([0-9.]+) B ]=] COMMAND ${RF_LARGEST} --gpu-memory-gb 80)
readme_figure(largest_model_80gb_12b EXPECT 53.3 TOL 0.05
  REGEX [=[^3 +([0-9.]+) B ]=] COMMAND ${RF_LARGEST} --gpu-memory-gb 80 --precision bf16)
readme_figure(largest_model_preset_16b EXPECT 42.5 TOL 0.05
  REGEX [=[^3 +([0-9.]+) B ]=] COMMAND ${RF_LARGEST})
readme_figure(largest_model_preset_12b EXPECT 56.6 TOL 0.05
  REGEX [=[^3 +([0-9.]+) B ]=] COMMAND ${RF_LARGEST} --precision bf16)

# --- Frameworks (README lines 131-156, 204-205). ---
# Line 133: replaying PyTorch's own allocator traces gives "PyTorch's reserved bytes within
# 0.5%": the worst |error| over the 20 traces (docs/frameworks.md lists the same files);
# tolerance 0.05 points (printed to 0.1).
file(GLOB RF_ALLOC_TRACES ${RF_FIXTURES}/allocator-traces/*.trace.gz)
readme_figure(allocator_replay_reserved_worst EXPECT 0.5 TOL 0.05
  REGEX [=[^reserved: mean \|error\| [0-9.]+%, worst ([0-9.]+)% \(20 traces\)$]=]
  COMMAND compare --allocator-traces ${RF_ALLOC_TRACES})
# Line 134: "and under an allocator cap PyTorch's verdict": the traces recorded under a cap whose
# replayed verdict differs from PyTorch's (printed "for N of M traces"; M - N); expected 0,
# tolerance 0.
file(GLOB RF_CAPPED_TRACES ${RF_FIXTURES}/allocator-traces-capped/*.trace.gz)
readme_figure(allocator_replay_cap_verdict EXPECT 0 TOL 0
  OPTIONS --expr g2-g1
  REGEX [=[the model's verdict is PyTorch's for ([0-9]+) of ([0-9]+) traces]=]
  COMMAND compare --allocator-traces ${RF_CAPPED_TRACES})
# Lines 153-154: partial recompute measured on one H200, "step time within 3.4%, peak reserved
# within 4.6% over twelve runs" (docs/frameworks.md, "Full recompute of some layers only": mean
# |error| over the twelve runs of runs-k.jsonl); tolerance 0.05 points (stated to 0.1). The mean
# is taken over the twelve runs' unrounded errors (JSON).
set(RF_NUM [=[(-?[0-9][0-9.]*(?:[eE][-+]?[0-9]+)?)]=])
set(RF_PARTIAL compare --framework-runs ${RF_RUNS}/runs-2026-12-04/partial-recompute/runs-k.jsonl
               --format json)
readme_figure(partial_recompute_step_time EXPECT 3.4 TOL 0.05
  OPTIONS --all mean --abs --matches 12 REGEX "\"error_pct\": ${RF_NUM}" COMMAND ${RF_PARTIAL})
readme_figure(partial_recompute_peak_reserved EXPECT 4.6 TOL 0.05
  OPTIONS --all mean --abs --matches 12 REGEX "\"memory_error_pct\": ${RF_NUM}"
  COMMAND ${RF_PARTIAL})
# Lines 154-156: the least N under a cap, over the 15 measured boundaries (both files of
# docs/frameworks.md, "The least full recompute that fits"; the four halves' counts summed):
# 15 boundaries, exact in 6, within one layer in 10, inside `memory`'s band range in 12
# (counts: tolerance 0), never fewer layers than the GPU needed (the least predicted - measured
# over the 15 is 0, the exact ones; a negative one is a miss on the unsafe side; tolerance 0).
set(RF_BOUNDARY compare
    --framework-runs ${RF_RUNS}/runs-2026-12-04/recompute-boundary/recompute-boundary.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-04/recompute-boundary/recompute-boundary-q.jsonl)
readme_figure(recompute_boundary_count EXPECT 15 TOL 0
  OPTIONS --all sum --matches 4
  REGEX [=[^[a-z-]+/(?:fit|test): .*recompute boundary: least layers recomputed exact [0-9]+/([0-9]+),]=]
  COMMAND ${RF_BOUNDARY})
readme_figure(recompute_boundary_exact EXPECT 6 TOL 0
  OPTIONS --all sum --matches 4
  REGEX [=[^[a-z-]+/(?:fit|test): .*recompute boundary: least layers recomputed exact ([0-9]+)/]=]
  COMMAND ${RF_BOUNDARY})
readme_figure(recompute_boundary_within_one EXPECT 10 TOL 0
  OPTIONS --all sum --matches 4
  REGEX [=[^[a-z-]+/(?:fit|test): .*recompute boundary: .*, within one ([0-9]+)/]=]
  COMMAND ${RF_BOUNDARY})
readme_figure(recompute_boundary_inside_band EXPECT 12 TOL 0
  OPTIONS --all sum --matches 4
  REGEX [=[^[a-z-]+/(?:fit|test): .*measured inside the memory band's range ([0-9]+)/]=]
  COMMAND ${RF_BOUNDARY})
readme_figure(recompute_boundary_never_fewer EXPECT 0 TOL 0
  OPTIONS --all min --expr g2-g1 --matches 15
  REGEX [=["min_recompute_layers_measured": ([0-9]+),\s*"min_recompute_layers_predicted": ([0-9]+)]=]
  COMMAND ${RF_BOUNDARY} --format json)
# Line 205: the device runs' step time against one pass alone (no --repeat-runs; the block
# "The same profiles against one pass alone" of docs/frameworks.md), test halves: "9.0% eager,
# 10.9% FSDP2"; tolerance 0.05 points (printed to 0.1).
set(RF_ONE_PASS compare
    --framework-runs ${RF_RUNS}/runs-2026-12-02/runs-a.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-02/runs-c.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-02/oom.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-02/runs-d.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-02/oom-b.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-02/runs-e.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-02/oom-c.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-03/runs-g.jsonl
    --framework-runs ${RF_RUNS}/runs-2026-12-03/runs-h.jsonl)
readme_figure(one_pass_eager_test EXPECT 9.0 TOL 0.05
  REGEX [=[^pytorch/test: [0-9]+ runs, time mean \|error\| ([0-9.]+)%]=] COMMAND ${RF_ONE_PASS})
readme_figure(one_pass_fsdp_test EXPECT 10.9 TOL 0.05
  REGEX [=[^fsdp/test: [0-9]+ runs, time mean \|error\| ([0-9.]+)%]=] COMMAND ${RF_ONE_PASS})

# --- On a GPU (README lines 278-300), from the committed measurements. ---
# Lines 282-283: held-out kernels, mean error 8.6% with the calibrated profile against 15.7% for
# the datasheet profile (48 cases); tolerance 0.05 points (printed to 0.1).
set(RF_HELDOUT compare --calibration h200 --measurements ${RF_FIXTURES}/h200-held-out.json
               --base h200-datasheet)
readme_figure(heldout_kernels_calibrated EXPECT 8.6 TOL 0.05
  REGEX [=[^mean \|error\|: datasheet [0-9.]+%, calibrated ([0-9.]+)% over 48 cases$]=]
  COMMAND ${RF_HELDOUT})
readme_figure(heldout_kernels_datasheet EXPECT 15.7 TOL 0.05
  REGEX [=[^mean \|error\|: datasheet ([0-9.]+)%, calibrated [0-9.]+% over 48 cases$]=]
  COMMAND ${RF_HELDOUT})
# Lines 284-285: our training step on one H200 (20 recorded runs, small..2.7B, bf16-mixed and
# fp32, recompute on and off): step time within 7.2%, peak memory within 6.6% (max |error|);
# tolerance 0.05 points (printed to 0.1).
set(RF_STEP compare --calibration h200 --train-step ${RF_FIXTURES}/h200-train-step.jsonl)
readme_figure(train_step_time EXPECT 7.2 TOL 0.05
  REGEX [=[^training steps: 20 runs, step time \|error\| mean [0-9.]+%, max ([0-9.]+)%]=]
  COMMAND ${RF_STEP})
readme_figure(train_step_peak_memory EXPECT 6.6 TOL 0.05
  REGEX [=[^training steps: 20 runs, .*; peak memory max \|error\| ([0-9.]+)%$]=]
  COMMAND ${RF_STEP})
# Line 286: on two GPUs every DDP variant and ZeRO-1 within 8%, gradient accumulation 11% (max
# |step error| over the 16 runs without accumulation and the 2 with it); tolerance 0.5 points
# (stated to the whole percent).
set(RF_DP compare --calibration h200-x2-nvlink
          --train-step ${RF_FIXTURES}/h200x2-dp-train-step.jsonl --format json)
readme_figure(train_step_dp_variants EXPECT 8 TOL 0.5
  OPTIONS --all max --abs --matches 16
  REGEX "\"run\": \"[^\"]*dp2 (?![^\"]*acc)[^\"]*\",\\s*\"step_error_pct\": ${RF_NUM}"
  COMMAND ${RF_DP})
readme_figure(train_step_dp_accumulation EXPECT 11 TOL 0.5
  OPTIONS --all max --abs --matches 2
  REGEX "\"run\": \"[^\"]* acc[0-9]+\",\\s*\"step_error_pct\": ${RF_NUM}"
  COMMAND ${RF_DP})
# Lines 297-300: collectives on 2 H200 over NVLink (the committed h200-x2-nvlink profile against
# the mpirun sweep it was fitted on).
set(RF_COLL compare --calibration h200-x2-nvlink
            --collectives ${RF_FIXTURES}/collectives-h200x2-mpi.json)
# "Five of six ops are predicted within 12.4% at every size >= 1 MiB"; tolerance 0.05 points.
readme_figure(collectives_five_ops EXPECT 12.4 TOL 0.05
  REGEX [=[^collectives: max \|error\| ([0-9.]+)% above 1 MiB]=]
  COMMAND ${RF_COLL} --ops all-reduce,all-gather,reduce-scatter,broadcast,send-recv)
# "all-to-all misses by 24.9% at an outlying 16 MiB point"; tolerance 0.05 points.
readme_figure(collectives_all_to_all EXPECT 24.9 TOL 0.05
  REGEX [=[^all-to-all +2 +[0-9]+ +([0-9.]+)% +16 MiB ]=] COMMAND ${RF_COLL})
# "(one line per op: 25-59%)": the six ops fitted with one alpha-beta line each
# (--max-regimes 1), max |error| >= 1 MiB per op as calibrate prints it; the range's ends,
# tolerance 0.5 points (stated to the whole percent).
foreach(RF_END min max)
  if(RF_END STREQUAL "min")
    set(RF_EXPECT 25)
  else()
    set(RF_EXPECT 59)
  endif()
  readme_figure(collectives_one_line_${RF_END} EXPECT ${RF_EXPECT} TOL 0.5
    OPTIONS --all ${RF_END} --matches 6
    REGEX [=[^  [a-z-]+ P=2: max error >= 1 MiB ([0-9.]+)% at ]=]
    COMMAND calibrate --collectives ${RF_FIXTURES}/collectives-h200x2-mpi.json --base h200
    --max-regimes 1 --out ${CMAKE_CURRENT_BINARY_DIR}/readme-figure-one-line-${RF_END}.json)
endforeach()
# "Latency about 7 us per call": all-reduce's measured median time at sizes <= 64 KiB (the
# other collectives 7.4-7.9 us, send-recv 10.3 us); tolerance 0.5 us ("about", whole us).
readme_figure(collectives_latency EXPECT 7 TOL 0.5
  REGEX [=[^all-reduce +2 +[0-9]+ +\S+% +\S+ \S+ +\S+% +\S+ \S+ +[0-9.]+ +([0-9.]+) +\S+%$]=]
  COMMAND ${RF_COLL})
# "(alpha within 2% of the small sizes)": the largest |alpha vs median time <= 64 KiB| over
# the six ops; tolerance 0.5 points (stated to the whole percent).
readme_figure(collectives_alpha_vs_small_sizes EXPECT 2 TOL 0.5
  OPTIONS --all max --abs --matches 6
  REGEX [=[^[a-z-]+ +2 +[0-9]+ +.* ([+-][0-9.]+)%$]=] COMMAND ${RF_COLL})
# "busbw at 4 GiB 348 GB/s for all-reduce and 305-366 for the others": measured busbw at 4 GiB;
# tolerance 0.5 GB/s (stated to the whole GB/s).
readme_figure(collectives_busbw_4gib_all_reduce EXPECT 348 TOL 0.5
  REGEX [=[^all-reduce +2 +4294967296 +\S+ +\S+ +\S+% +([0-9.]+) ]=] COMMAND ${RF_COLL})
readme_figure(collectives_busbw_4gib_min EXPECT 305 TOL 0.5
  OPTIONS --all min --matches 6
  REGEX [=[^[a-z-]+ +2 +4294967296 +\S+ +\S+ +\S+% +([0-9.]+) ]=] COMMAND ${RF_COLL})
readme_figure(collectives_busbw_4gib_max EXPECT 366 TOL 0.5
  OPTIONS --all max --matches 6
  REGEX [=[^[a-z-]+ +2 +4294967296 +\S+ +\S+ +\S+% +([0-9.]+) ]=] COMMAND ${RF_COLL})

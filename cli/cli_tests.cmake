# End-to-end tests of the trainsim binary: golden figures from the docs and the issue, and
# every class of bad input exits 1 with a message naming the field.
function(trainsim_cli_test name regex)
  add_test(NAME cli.${name} COMMAND trainsim ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
endfunction()
# A bad input: exit code 1 (WILL_FAIL) and the message must name the field.
function(trainsim_cli_error name regex)
  add_test(NAME cli.error.${name} COMMAND trainsim ${ARGN})
  set_tests_properties(cli.error.${name} PROPERTIES WILL_FAIL TRUE)
  add_test(NAME cli.error.${name}.message COMMAND trainsim ${ARGN})
  set_tests_properties(cli.error.${name}.message PROPERTIES PASS_REGULAR_EXPRESSION "${regex}")
endfunction()

# Golden figures.
trainsim_cli_test(time_cs336 "\"days\": 143\\.9[0-9]*"
  time --params 70e9 --tokens 15T --gpu h100-sxm --num-gpus 1024 --mfu 0.5 --format json)
trainsim_cli_test(model_gpt2 "\"total\": 124439808"
  model --model gpt2 --format json)
trainsim_cli_test(memory_zero1 "\"total\": 31406250000"
  memory --params 7.5e9 --num-gpus 64 --zero 1 --format json)
trainsim_cli_test(memory_max_params "\"zero3\": 40000000000"
  memory --gpu h100-sxm --num-gpus 8 --max-params --format json)
trainsim_cli_test(memory_max_params_12 "\"zero3\": 53333333333"
  memory --gpu h100-sxm --num-gpus 8 --max-params --precision bf16 --format json)
trainsim_cli_test(memory_fits "\"fits\": true"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --zero 3 --seq-len 4096 --format json)
trainsim_cli_test(memory_does_not_fit "DOES NOT FIT"
  memory --model llama3-70b --gpu h100-sxm --num-gpus 8)
trainsim_cli_test(presets_list "llama3-405b" presets list models)
trainsim_cli_test(csv_output "^quantity,value,exact" model --model gpt2 --format csv --quiet)

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
trainsim_cli_error(zero_stage "zero_stage = 5: must be 0, 1, 2 or 3"
  memory --model llama3-8b --gpu h100-sxm --num-gpus 8 --zero 5)
trainsim_cli_error(bad_tokens "--tokens = 'lots'" time --params 7e9 --tokens lots --gpu h100-sxm)
trainsim_cli_error(bad_mfu "--mfu = 1.5" time --params 7e9 --tokens 1T --gpu h100-sxm --mfu 1.5)
trainsim_cli_error(neg_seq "seq_len = -5: must be positive"
  memory --model gpt2 --gpu h100-sxm --seq-len -5)
trainsim_cli_error(bad_precision "precision" memory --model gpt2 --gpu h100-sxm --precision fp64)
trainsim_cli_error(no_machine "--gpu or --cluster" memory --model gpt2)
trainsim_cli_error(learned_positions "exceeds the model's learned positions"
  memory --model gpt2 --gpu h100-sxm --seq-len 4096)

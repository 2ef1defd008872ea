package ember

// #include "wrap.h"
import "C"

import "unsafe"

// The C structs the binding uses, as cgo sees them (sizes, alignments, field offsets and sizes).
// layout_test.go compares them with bindings/layout/ember.layout: a mismatch means the header cgo
// compiled against and the table differ. Every field of these structs is listed, so a field the table
// has and this list lacks fails the test too (add it here and wherever the binding fills the struct).

type cFieldLayout struct {
	name         string
	offset, size uintptr
}

type cStructLayout struct {
	name        string
	size, align uintptr
	fields      []cFieldLayout
}

func cgoStructLayouts() []cStructLayout {
	var s0 C.ember_model_params
	var s1 C.ember_model_info
	var s2 C.ember_session_params
	var s3 C.ember_sampler_params
	var s4 C.ember_generate_params
	var s5 C.ember_spec_params
	var s6 C.ember_engine_params
	var s7 C.ember_engine_stats
	var s8 C.ember_request_params
	var s9 C.ember_chat_message
	return []cStructLayout{
		{"ember_model_params", C.sizeof_ember_model_params, unsafe.Alignof(s0), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s0.struct_size), unsafe.Sizeof(s0.struct_size)},
			{"progress", unsafe.Offsetof(s0.progress), unsafe.Sizeof(s0.progress)},
			{"progress_user_data", unsafe.Offsetof(s0.progress_user_data), unsafe.Sizeof(s0.progress_user_data)},
			{"vocab_only", unsafe.Offsetof(s0.vocab_only), unsafe.Sizeof(s0.vocab_only)},
			{"log", unsafe.Offsetof(s0.log), unsafe.Sizeof(s0.log)},
			{"log_user_data", unsafe.Offsetof(s0.log_user_data), unsafe.Sizeof(s0.log_user_data)},
		}},
		{"ember_model_info", C.sizeof_ember_model_info, unsafe.Alignof(s1), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s1.struct_size), unsafe.Sizeof(s1.struct_size)},
			{"architecture", unsafe.Offsetof(s1.architecture), unsafe.Sizeof(s1.architecture)},
			{"name", unsafe.Offsetof(s1.name), unsafe.Sizeof(s1.name)},
			{"n_params", unsafe.Offsetof(s1.n_params), unsafe.Sizeof(s1.n_params)},
			{"size_bytes", unsafe.Offsetof(s1.size_bytes), unsafe.Sizeof(s1.size_bytes)},
			{"n_ctx_train", unsafe.Offsetof(s1.n_ctx_train), unsafe.Sizeof(s1.n_ctx_train)},
			{"n_vocab", unsafe.Offsetof(s1.n_vocab), unsafe.Sizeof(s1.n_vocab)},
			{"n_embd", unsafe.Offsetof(s1.n_embd), unsafe.Sizeof(s1.n_embd)},
			{"n_layer", unsafe.Offsetof(s1.n_layer), unsafe.Sizeof(s1.n_layer)},
			{"n_head", unsafe.Offsetof(s1.n_head), unsafe.Sizeof(s1.n_head)},
			{"n_head_kv", unsafe.Offsetof(s1.n_head_kv), unsafe.Sizeof(s1.n_head_kv)},
			{"kv_bytes_per_token", unsafe.Offsetof(s1.kv_bytes_per_token), unsafe.Sizeof(s1.kv_bytes_per_token)},
			{"state_bytes_per_sequence", unsafe.Offsetof(s1.state_bytes_per_sequence), unsafe.Sizeof(s1.state_bytes_per_sequence)},
			{"n_kv_layers", unsafe.Offsetof(s1.n_kv_layers), unsafe.Sizeof(s1.n_kv_layers)},
			{"n_recurrent_layers", unsafe.Offsetof(s1.n_recurrent_layers), unsafe.Sizeof(s1.n_recurrent_layers)},
		}},
		{"ember_session_params", C.sizeof_ember_session_params, unsafe.Alignof(s2), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s2.struct_size), unsafe.Sizeof(s2.struct_size)},
			{"n_ctx", unsafe.Offsetof(s2.n_ctx), unsafe.Sizeof(s2.n_ctx)},
			{"n_threads", unsafe.Offsetof(s2.n_threads), unsafe.Sizeof(s2.n_threads)},
			{"n_batch", unsafe.Offsetof(s2.n_batch), unsafe.Sizeof(s2.n_batch)},
			{"seed", unsafe.Offsetof(s2.seed), unsafe.Sizeof(s2.seed)},
			{"backend", unsafe.Offsetof(s2.backend), unsafe.Sizeof(s2.backend)},
			{"reserved", unsafe.Offsetof(s2.reserved), unsafe.Sizeof(s2.reserved)},
			{"n_seq_max", unsafe.Offsetof(s2.n_seq_max), unsafe.Sizeof(s2.n_seq_max)},
			{"kv_type", unsafe.Offsetof(s2.kv_type), unsafe.Sizeof(s2.kv_type)},
			{"device", unsafe.Offsetof(s2.device), unsafe.Sizeof(s2.device)},
			{"gpu_layers", unsafe.Offsetof(s2.gpu_layers), unsafe.Sizeof(s2.gpu_layers)},
			{"experts_on_cpu", unsafe.Offsetof(s2.experts_on_cpu), unsafe.Sizeof(s2.experts_on_cpu)},
			{"gpu_budget_bytes", unsafe.Offsetof(s2.gpu_budget_bytes), unsafe.Sizeof(s2.gpu_budget_bytes)},
		}},
		{"ember_sampler_params", C.sizeof_ember_sampler_params, unsafe.Alignof(s3), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s3.struct_size), unsafe.Sizeof(s3.struct_size)},
			{"temperature", unsafe.Offsetof(s3.temperature), unsafe.Sizeof(s3.temperature)},
			{"top_k", unsafe.Offsetof(s3.top_k), unsafe.Sizeof(s3.top_k)},
			{"top_p", unsafe.Offsetof(s3.top_p), unsafe.Sizeof(s3.top_p)},
			{"min_p", unsafe.Offsetof(s3.min_p), unsafe.Sizeof(s3.min_p)},
			{"repeat_penalty", unsafe.Offsetof(s3.repeat_penalty), unsafe.Sizeof(s3.repeat_penalty)},
			{"frequency_penalty", unsafe.Offsetof(s3.frequency_penalty), unsafe.Sizeof(s3.frequency_penalty)},
			{"presence_penalty", unsafe.Offsetof(s3.presence_penalty), unsafe.Sizeof(s3.presence_penalty)},
			{"penalty_last_n", unsafe.Offsetof(s3.penalty_last_n), unsafe.Sizeof(s3.penalty_last_n)},
			{"seed", unsafe.Offsetof(s3.seed), unsafe.Sizeof(s3.seed)},
			{"n_logprobs", unsafe.Offsetof(s3.n_logprobs), unsafe.Sizeof(s3.n_logprobs)},
		}},
		{"ember_generate_params", C.sizeof_ember_generate_params, unsafe.Alignof(s4), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s4.struct_size), unsafe.Sizeof(s4.struct_size)},
			{"max_tokens", unsafe.Offsetof(s4.max_tokens), unsafe.Sizeof(s4.max_tokens)},
			{"on_token", unsafe.Offsetof(s4.on_token), unsafe.Sizeof(s4.on_token)},
			{"user_data", unsafe.Offsetof(s4.user_data), unsafe.Sizeof(s4.user_data)},
			{"speculate", unsafe.Offsetof(s4.speculate), unsafe.Sizeof(s4.speculate)},
			{"reserved_1_4", unsafe.Offsetof(s4.reserved_1_4), unsafe.Sizeof(s4.reserved_1_4)},
			{"grammar", unsafe.Offsetof(s4.grammar), unsafe.Sizeof(s4.grammar)},
			{"stop", unsafe.Offsetof(s4.stop), unsafe.Sizeof(s4.stop)},
			{"n_stop", unsafe.Offsetof(s4.n_stop), unsafe.Sizeof(s4.n_stop)},
		}},
		{"ember_spec_params", C.sizeof_ember_spec_params, unsafe.Alignof(s5), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s5.struct_size), unsafe.Sizeof(s5.struct_size)},
			{"mode", unsafe.Offsetof(s5.mode), unsafe.Sizeof(s5.mode)},
			{"draft_model", unsafe.Offsetof(s5.draft_model), unsafe.Sizeof(s5.draft_model)},
			{"k", unsafe.Offsetof(s5.k), unsafe.Sizeof(s5.k)},
			{"adaptive", unsafe.Offsetof(s5.adaptive), unsafe.Sizeof(s5.adaptive)},
			{"k_max", unsafe.Offsetof(s5.k_max), unsafe.Sizeof(s5.k_max)},
			{"ngram_max", unsafe.Offsetof(s5.ngram_max), unsafe.Sizeof(s5.ngram_max)},
			{"n_threads", unsafe.Offsetof(s5.n_threads), unsafe.Sizeof(s5.n_threads)},
		}},
		{"ember_engine_params", C.sizeof_ember_engine_params, unsafe.Alignof(s6), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s6.struct_size), unsafe.Sizeof(s6.struct_size)},
			{"n_ctx", unsafe.Offsetof(s6.n_ctx), unsafe.Sizeof(s6.n_ctx)},
			{"n_seq_max", unsafe.Offsetof(s6.n_seq_max), unsafe.Sizeof(s6.n_seq_max)},
			{"kv_bytes", unsafe.Offsetof(s6.kv_bytes), unsafe.Sizeof(s6.kv_bytes)},
			{"n_threads", unsafe.Offsetof(s6.n_threads), unsafe.Sizeof(s6.n_threads)},
			{"n_batch", unsafe.Offsetof(s6.n_batch), unsafe.Sizeof(s6.n_batch)},
			{"backend", unsafe.Offsetof(s6.backend), unsafe.Sizeof(s6.backend)},
			{"manual_step", unsafe.Offsetof(s6.manual_step), unsafe.Sizeof(s6.manual_step)},
			{"kv_type", unsafe.Offsetof(s6.kv_type), unsafe.Sizeof(s6.kv_type)},
			{"reserved", unsafe.Offsetof(s6.reserved), unsafe.Sizeof(s6.reserved)},
			{"device", unsafe.Offsetof(s6.device), unsafe.Sizeof(s6.device)},
			{"gpu_layers", unsafe.Offsetof(s6.gpu_layers), unsafe.Sizeof(s6.gpu_layers)},
			{"experts_on_cpu", unsafe.Offsetof(s6.experts_on_cpu), unsafe.Sizeof(s6.experts_on_cpu)},
			{"gpu_budget_bytes", unsafe.Offsetof(s6.gpu_budget_bytes), unsafe.Sizeof(s6.gpu_budget_bytes)},
			{"speculation", unsafe.Offsetof(s6.speculation), unsafe.Sizeof(s6.speculation)},
			{"spec_k", unsafe.Offsetof(s6.spec_k), unsafe.Sizeof(s6.spec_k)},
			{"spec_ngram_max", unsafe.Offsetof(s6.spec_ngram_max), unsafe.Sizeof(s6.spec_ngram_max)},
			{"reserved_1_10", unsafe.Offsetof(s6.reserved_1_10), unsafe.Sizeof(s6.reserved_1_10)},
		}},
		{"ember_engine_stats", C.sizeof_ember_engine_stats, unsafe.Alignof(s7), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s7.struct_size), unsafe.Sizeof(s7.struct_size)},
			{"n_blocks", unsafe.Offsetof(s7.n_blocks), unsafe.Sizeof(s7.n_blocks)},
			{"n_blocks_used", unsafe.Offsetof(s7.n_blocks_used), unsafe.Sizeof(s7.n_blocks_used)},
			{"n_blocks_cached", unsafe.Offsetof(s7.n_blocks_cached), unsafe.Sizeof(s7.n_blocks_cached)},
			{"block_size", unsafe.Offsetof(s7.block_size), unsafe.Sizeof(s7.block_size)},
			{"n_running", unsafe.Offsetof(s7.n_running), unsafe.Sizeof(s7.n_running)},
			{"n_queued", unsafe.Offsetof(s7.n_queued), unsafe.Sizeof(s7.n_queued)},
			{"kv_bytes", unsafe.Offsetof(s7.kv_bytes), unsafe.Sizeof(s7.kv_bytes)},
		}},
		{"ember_request_params", C.sizeof_ember_request_params, unsafe.Alignof(s8), []cFieldLayout{
			{"struct_size", unsafe.Offsetof(s8.struct_size), unsafe.Sizeof(s8.struct_size)},
			{"prompt", unsafe.Offsetof(s8.prompt), unsafe.Sizeof(s8.prompt)},
			{"n_prompt", unsafe.Offsetof(s8.n_prompt), unsafe.Sizeof(s8.n_prompt)},
			{"max_tokens", unsafe.Offsetof(s8.max_tokens), unsafe.Sizeof(s8.max_tokens)},
			{"sampling", unsafe.Offsetof(s8.sampling), unsafe.Sizeof(s8.sampling)},
			{"on_token", unsafe.Offsetof(s8.on_token), unsafe.Sizeof(s8.on_token)},
			{"user_data", unsafe.Offsetof(s8.user_data), unsafe.Sizeof(s8.user_data)},
			{"grammar", unsafe.Offsetof(s8.grammar), unsafe.Sizeof(s8.grammar)},
			{"stop", unsafe.Offsetof(s8.stop), unsafe.Sizeof(s8.stop)},
			{"n_stop", unsafe.Offsetof(s8.n_stop), unsafe.Sizeof(s8.n_stop)},
			{"speculate", unsafe.Offsetof(s8.speculate), unsafe.Sizeof(s8.speculate)},
		}},
		{"ember_chat_message", C.sizeof_ember_chat_message, unsafe.Alignof(s9), []cFieldLayout{
			{"role", unsafe.Offsetof(s9.role), unsafe.Sizeof(s9.role)},
			{"content", unsafe.Offsetof(s9.content), unsafe.Sizeof(s9.content)},
		}},
	}
}

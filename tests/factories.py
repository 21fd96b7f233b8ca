"""Small config factories for tests."""

import torch

from adjpos.models import ModelConfig
from adjpos.study.pipeline import ReproduceConfig

# The tests' `reproduce` settings: tiny sizes, in-process, HTML figures only.
TINY_REPRODUCE = ReproduceConfig(size="tiny", device="cpu", workers=0, png=False)


def tiny_config(**overrides) -> ModelConfig:
    """A small, fast config; override any field."""
    fields = dict(n_layers=2, d_model=16, n_heads=2, d_vocab=20, n_ctx=24, seed=0)
    fields.update(overrides)
    return ModelConfig(**fields)


def tiny_bridge():
    """A small TransformerBridge with random weights (rotary positions), built offline."""
    from transformer_lens.model_bridge import TransformerBridge

    return TransformerBridge.boot_native(
        dict(
            n_layers=2,
            d_model=16,
            n_heads=2,
            d_head=8,
            d_mlp=32,
            d_vocab=20,
            n_ctx=24,
            act_fn="gelu",
            seed=0,
            positional_embedding_type="rotary",
        )
    )


def tiny_gguf(path):
    """A tiny random Llama written as a GGUF file with the `gguf` package's writer (float32
    tensors, a byte-level tokenizer of 64 single characters); returns the Hugging Face model
    it was written from. The query and key rows are permuted as llama.cpp's converter does,
    so transformers' reader gives back the same weights."""
    import gguf
    import torch
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        hf = transformers.LlamaForCausalLM(config).eval()
    state = {k: v.detach().numpy() for k, v in hf.state_dict().items()}

    def permute(w, heads):
        return w.reshape(heads, 2, w.shape[0] // heads // 2, -1).swapaxes(1, 2).reshape(w.shape)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    tokens = [*"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "Ġ", "!"]
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * len(tokens))
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_merges([])
    writer.add_bos_token_id(63)
    writer.add_eos_token_id(62)
    names = {
        "attn_norm": "input_layernorm",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_norm": "post_attention_layernorm",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
    }
    writer.add_tensor("token_embd.weight", state["model.embed_tokens.weight"])
    for i in range(config.num_hidden_layers):
        layer = f"model.layers.{i}."
        for ours, theirs in names.items():
            writer.add_tensor(f"blk.{i}.{ours}.weight", state[f"{layer}{theirs}.weight"])
        q, k = state[f"{layer}self_attn.q_proj.weight"], state[f"{layer}self_attn.k_proj.weight"]
        writer.add_tensor(f"blk.{i}.attn_q.weight", permute(q, config.num_attention_heads))
        writer.add_tensor(f"blk.{i}.attn_k.weight", permute(k, config.num_key_value_heads))
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    writer.add_tensor("output.weight", state["lm_head.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return hf


def word_tokenizer(folder, bos=None):
    """A word-level tokenizer of "<pad> <s> </s> <unk> w0 .. w99" (ids 0 .. 103), saved into
    `folder` beside a model, as a user's checkpoint would hold one."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<pad>", "<s>", "</s>", "<unk>", *(f"w{i}" for i in range(100))]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token=bos
    )
    fast.save_pretrained(folder)
    return fast


# Position curves and prompt states of random models (the position-curve arms' tests).


def random_curve(seed: int, pos: int, d: int, smooth: bool = True) -> torch.Tensor:
    """A curve [pos, d] centred over positions: a smooth arc plus noise, or pure noise."""
    gen = torch.Generator().manual_seed(seed)
    t = torch.arange(pos, dtype=torch.float64)[:, None]
    noise = torch.randn(pos, d, generator=gen, dtype=torch.float64)
    if smooth:
        mix = torch.randn(3, d, generator=gen, dtype=torch.float64)
        arc = torch.cat([torch.cos(t / 3), torch.sin(t / 3), t / pos], dim=1) @ mix
        noise = arc + 0.05 * noise
    return noise - noise.mean(dim=0)


def random_prompts(seed=0, lengths=(6, 7, 9), n=8, d=8, vocab=8):
    """{L: (states, tokens)}: token embeddings, a smooth position curve, noise."""
    gen = torch.Generator().manual_seed(seed)
    embed = torch.randn(vocab, d, generator=gen, dtype=torch.float64)
    out = {}
    for length in lengths:
        tokens = torch.randint(0, vocab, (n, length), generator=gen)
        curve = random_curve(seed + length, length, d)
        noise = 0.1 * torch.randn(n, length, d, generator=gen, dtype=torch.float64)
        out[length] = (embed[tokens] + 2 * curve + noise, tokens)
    return out


def prompt_run(length: int) -> tuple[tuple[int, int], ...]:
    """The whole prompt before its read-out position as one run: ((0, length - 2),)."""
    return ((0, length - 2),)


class MemoryFolder:
    """A run folder's unit markers in memory (`adjpos.runs.RunFolder`'s ``is_done``,
    ``mark_done`` and ``result``): ``done`` maps each finished unit to its result; a stage
    writes into ``path``/results."""

    def __init__(self, path=None):
        self.path, self.done = path, {}

    def is_done(self, unit):
        return unit in self.done

    def mark_done(self, unit, result=None):
        self.done[unit] = result

    def result(self, unit):
        return self.done[unit]

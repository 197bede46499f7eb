"""Operations on top of every product: the launch plan, the memory model and estimate, the toy experiments and the
prompt inspector. Library modules here are imported by no other package, only by entry points
(docs/ARCHITECTURE.md)."""

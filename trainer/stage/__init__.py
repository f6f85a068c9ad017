"""One Trainer call (``fit``/``validate``/``test``/``predict``): its plan, its per-call object ``StageRun``, hooks and set-up."""

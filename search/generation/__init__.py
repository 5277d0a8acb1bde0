"""OptiML-G: the first kernel from an intent, by a Mixture-of-Thoughts over code models.

Pure, like the other cores (no Django): the web app and `manage.py generation` call it.

- `experts`: who can write a kernel. Experts behind OpenAI-compatible endpoints
  (vLLM, Ollama, llama.cpp's server, hosted APIs) and local `transformers` models, by
  path or hub id, loaded only when used and never downloaded (local files only).
- `router`: a frozen sentence encoder and a small MLP that scores each expert for a
  task; the top-K are the active set, the best of them the primary. Trained on the
  product's own logged outcomes; a configured default order until it has data.
- `mot`: local experts collaborating in latent space (the Mixture-of-Thoughts of
  Fein-Ashley et al., arXiv 2509.21164): the experts' layers split into stacks; after
  each stack the peers' hidden states go through adapters into a shared space and the
  primary cross-attends over them through a zero-initialised gated residual.
- `text`: API experts collaborating in text: each active expert drafts an approach
  and a kernel, the primary composes the final kernel from the drafts.
- `loop`: generate -> gate (policy, compile, L0) -> repair with the gate's messages,
  up to N rounds; every attempt is kept, naming who wrote it.
- `passk`: pass@1, pass@k and time to the first passing kernel over the suite's intents.

torch and transformers are needed only by `router`, `mot` and local experts (the
`generation` extra); API experts and the loop run without them.
"""

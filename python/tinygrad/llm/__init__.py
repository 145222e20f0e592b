"""tinygrad.llm: run GGUF language models. gguf.py reads the files (quants.py: every ggml type's dequantization as Tensor ops, fused
into the kernel that reads the weight), tokenizer.py and chat_template.py turn text into ids and conversations into prompts,
model.py is the Transformer (KV cache, TinyJit prefill/decode, sampling), serve.py the OpenAI-compatible server, cli.py
`python -m tinygrad.llm`."""

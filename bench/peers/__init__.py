"""The Python pipelines `mmfeed bench` measures mmfeed against (bench/pipeline.py): what users run
today. hf_sample: their shared per-sample code (boto3 or a file read, Hugging Face's Qwen2-VL
processor and tokenizer with the chat template, collate); pipelines: the naive loop, PyTorch's
DataLoader and SPDL over it."""

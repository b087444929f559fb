"""A complete training loop on CPU with a tiny model, fed by mmfeed through the Megatron-shaped
adapter: batches arrive as torch tensors sharing the engine's memory; the model embeds the
tokens (folded into a 4,096-entry vocabulary to stay tiny), adds a projection of the batch's
mean image patch, and learns next-token prediction on the labelled (assistant) tokens only.

    python examples/train_tiny.py demo-data/manifest.jsonl --steps 20
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

import mmfeed.megatron

ROOT = Path(__file__).resolve().parents[1]


class TinyVLM(torch.nn.Module):
    def __init__(self, vocab: int = 4096, dim: int = 64, patch_dim: int = 1176):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.vision = torch.nn.Linear(patch_dim, dim)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, batch):
        x = self.embed(batch["input_ids"] % self.embed.num_embeddings)
        # one image summary per batch: the mean patch, projected, added to every position (a
        # batch of text-only samples has no patch rows, and no summary)
        if batch["pixel_values"].shape[0] > 0:
            x = x + self.vision(batch["pixel_values"].mean(dim=0))
        return self.head(x)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("manifest")
    parser.add_argument("--tokenizer", default=str(ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"))
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    train, _, _ = mmfeed.megatron.build_train_valid_test_data_iterators(
        args.manifest, tokenizer=args.tokenizer, batch_size=4, max_pixels=200_000, seed=0)
    model = TinyVLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    losses = []
    for step in range(args.steps):
        batch = next(train)
        logits = model(batch)
        # predict token t+1 from position t, on labelled positions only
        labels = batch["labels"][:, 1:]
        labels = torch.where(labels >= 0, labels % logits.shape[-1], labels)
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 labels.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        print(f"step {step:3d}  loss {loss.item():7.3f}  tokens {int(batch['attention_mask'].sum())}")
    print(f"{args.steps} steps in {time.perf_counter() - start:.1f} s; loss {losses[0]:.2f} -> {losses[-1]:.2f}; "
          f"data state {mmfeed.megatron.state_dict(train)}")
    train.close()
    return 0 if losses[-1] < losses[0] else 1


if __name__ == "__main__":
    raise SystemExit(main())

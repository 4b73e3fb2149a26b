"""Dataset modules: one per upstream dataset (EMNIST, Omniglot, backgrounds)."""

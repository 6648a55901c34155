"""Analyses of trained models that are not model code: tree-score (Murty et al. 2023; MosaiCLIP Sec. 4.2)."""

"""Worked examples of the weight recipes: `toy` runs on the embedded model (CPU), `imo_answerbench` on GPUs."""

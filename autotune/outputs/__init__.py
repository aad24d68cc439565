"""What a study hands back: best.yaml, trials.csv, the plot, the live display, `show`."""

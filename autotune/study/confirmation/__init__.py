"""After the search: the leaders re-run in rounds of fresh processes, a real lead, the winner."""

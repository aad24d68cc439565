"""What is searched: the space file (`file`), its `when:` grammar, the space bound to an adapter."""

"""Small constructs wired together by ``stacks.refresh_stack``; each takes typed keyword-only props."""

"""The GitHub mirror: leases and the work queue shown as labels, assignees and comments on
GitHub issues, and a person's ``WIP`` label recorded as a human hold — through ``gh`` only."""

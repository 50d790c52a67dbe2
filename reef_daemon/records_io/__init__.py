"""Records in and out: conversations imported from agent session files, and scored records exported as datasets."""

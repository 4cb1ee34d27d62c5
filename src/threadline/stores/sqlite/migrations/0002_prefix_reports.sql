-- Every model call carries its prefix report: how much of it repeated the previous call on
-- its branch, and where and why it stopped (JSON; see threadline/cache/prefix.py).
ALTER TABLE model_calls ADD COLUMN prefix_report TEXT;

"""Multi-turn evaluation: Lost in Conversation's sharded tasks under its five conditions,
each simulated turn an ordinary threadline conversation in the run's own store, graded by
program, re-scorable from the log without a model call (docs/eval.md).

    tasks        the sharded instructions, and which kinds are graded
    conditions   FULL, CONCAT, SHARDED, RECAP, SNOWBALL as user turns
    simulators   the simulated user (shard revealer, or a model)
    arms         how the engine is configured for a run: plain, or an intervention
    interventions  the arms' context providers (requirements, recap, goal)
    backends     the run's model, with the reply cap and a per-trial seed
    graders      math_answers, code_tests, action_calls behind one lookup
    config       the TOML config, checked
    runner       a run: every task × condition × arm (under its conditions) × trial
    records      the run directory
    metrics      P, A90, U90-10, pass^k, bootstrap intervals
    report       the report from the store; plots
    lic_logs     the graders checked against the published simulation logs
    n1           N-1 replay: real transcripts' last reply under settings A and B
                 (n1_transcripts, n1_config, rubrics, rubric_checks, judges, n1_report)
"""

"""LongMemEval (Wu et al., ICLR 2025): retrieval and QA harnesses over the LongMemEval_S haystacks."""

DROP TABLE claim_gate;

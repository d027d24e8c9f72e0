package robustness

const replicaEnv = "JOBQ_ROBUSTNESS_REPLICA"

func runReplica() int { return 0 }

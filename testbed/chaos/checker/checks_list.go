package checker

// Checks lists every check Check runs, in the order of its verdict table
// (`jobq check`, the chaos report). A check added to Check is added here,
// with a failing history in testdata/<check>.ndjson.
func Checks() []string {
	return []string{
		CheckLost, CheckAckedMissing, CheckStuck, CheckTxDuplicate,
		CheckOverlap, CheckStaleAccepted, CheckPhantom, CheckPoison,
		CheckClaimedEarly, CheckWorkAfterLoss, CheckUnexplainedRescue, CheckUnexplainedRelease,
		CheckMissingExecution, CheckStatusVsLastExecution, CheckRerunAfterSuccess, CheckFailedAfterSuccess,
		CheckLateCompletionAccepted, CheckAppliedTwice, CheckWorkerOverlap, CheckLostAfterAck,
		CheckChildBeforeParentSuccess, CheckChildRunTwice, CheckStuckWaitingOnDoneParents, CheckRanAfterParentFailed,
		CheckFireMissing, CheckFireDoubled,
		CheckRateLimitExceeded,
		CheckKeyOverlap,
	}
}

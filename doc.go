// Package jobq is the vocabulary of the jobq scheduler: the job, its states
// and outcomes, the fencing token of a run, the errors callers branch on and
// the parameter shapes that cross the persistence seam. It imports only the
// standard library, so every other package (the MySQL adapter in store/, the
// scheduler, the transports and the client) can talk about a job without
// importing each other.
package jobq

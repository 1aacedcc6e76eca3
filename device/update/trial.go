package update

import "time"

// Supervisor runs the services: nvinit's. A deploy's store steps run on
// its goroutine (Do), as a text repair's do, so no service starts while
// its program is switched; a deploy's trial is its to run (Replace): stop
// the service, switch its program, start it, and keep the new program only
// if it becomes ready within the deadline, otherwise switch back.
type Supervisor interface {
	// Do runs f on the supervisor's goroutine and waits for it; an error
	// when the supervisor is shutting down and f did not run.
	Do(f func()) error
	// Replace runs a trial of service name with ops and waits for its end.
	Replace(name string, deadline time.Duration, ops TrialOps) TrialResult
}

// TrialOps are the store's steps of a trial (Programs.Trial), each called
// on the supervisor's goroutine with the service stopped (Keep: running
// and ready).
type TrialOps struct {
	Path   string       // what the service starts from during and after the trial (its link)
	Switch func() error // make Path name the new program
	Keep   func() error // the new program stays
	Revert func() error // make Path name the old program again
}

// TrialResult is how a trial ended.
type TrialResult struct {
	Result          string // contract.DeployKept or contract.DeployRolledBack; "" with Err
	Reason          string // why it was rolled back
	Ready, Downtime time.Duration
	Err             error // the trial could not run, or could not switch; see the text
}

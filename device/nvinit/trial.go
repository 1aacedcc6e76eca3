package nvinit

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/nvboot/nvboot/device/contract"
	"github.com/nvboot/nvboot/device/update"
)

// A trial is the supervisor's side of a deploy (update.Supervisor.Replace):
// stop the service, switch its program, start it, and keep the new program
// only if it becomes ready within a deadline; otherwise stop it, switch
// back, start the old one. All of it runs on Run's goroutine, like every
// other change to a service, so a trial and the restart logic never race;
// the store's side (the links) is update.TrialOps.

// The supervisor runs the update endpoint's trials.
var _ update.Supervisor = (*supervisor)(nil)

type trialPhase int

const (
	trialStopping  trialPhase = iota // the old program is being stopped
	trialTrying                      // the new program runs, not ready yet
	trialUndoing                     // the new program is being stopped
	trialRestoring                   // the old program runs again, not ready yet
)

type trial struct {
	ops      update.TrialOps
	deadline time.Duration
	phase    trialPhase
	oldPath  string
	stopped  time.Time // the old program's stop began
	started  time.Time // the new program's start
	reason   string
	timer    func() bool // the deadline
	kill     func() bool // SIGKILL after the grace period
	done     chan update.TrialResult
}

// errSupervisorDone is a trial's error once the supervisor has returned.
var errSupervisorDone = errors.New("nvinit is shutting down")

// Replace runs a trial of service name (see trial), waiting for its end.
// It is refused for a service that is not supervised here (unknown, or
// DontStart), a pooled one (poold keeps its own program path) or one with
// a trial running.
func (s *supervisor) Replace(name string, deadline time.Duration, ops update.TrialOps) update.TrialResult {
	done := make(chan update.TrialResult, 1)
	s.post(func() { s.beginTrial(name, deadline, ops, done) })
	select {
	case r := <-done:
		return r
	case <-s.ran:
		select {
		case r := <-done:
			return r
		default:
			return update.TrialResult{Err: errSupervisorDone}
		}
	}
}

// Do runs f on Run's goroutine and waits for it: the store's remounts
// happen there, never beside a text repair or a start.
func (s *supervisor) Do(f func()) error {
	done := make(chan struct{})
	s.post(func() { f(); close(done) })
	select {
	case <-done:
		return nil
	case <-s.ran:
		select {
		case <-done:
			return nil
		default:
			return errSupervisorDone
		}
	}
}

// Service returns the supervised service called name, and the path it
// starts from; ok false when there is none.
func (s *supervisor) lookup(name string) *svc {
	for _, sv := range s.svcs {
		if sv.Name == name {
			return sv
		}
	}
	return nil
}

func (s *supervisor) beginTrial(name string, deadline time.Duration, ops update.TrialOps, done chan update.TrialResult) {
	sv := s.lookup(name)
	switch {
	case s.stopping:
		done <- update.TrialResult{Err: errSupervisorDone}
		return
	case sv == nil:
		done <- update.TrialResult{Err: fmt.Errorf("no service %q is supervised here (not in the image's config, or DontStart)", name)}
		return
	case sv.Pool != "":
		done <- update.TrialResult{Err: fmt.Errorf("service %s is started through poold, whose programs cannot be deployed yet", name)}
		return
	case sv.trial != nil:
		done <- update.TrialResult{Err: fmt.Errorf("service %s: another deploy of it is running", name)}
		return
	}
	t := &trial{ops: ops, deadline: deadline, oldPath: sv.Path, done: done, stopped: s.Clock.Now()}
	sv.trial = t
	s.Console.Logf("%s: deploy: stopping it to start the new program", name)
	s.stopForTrial(sv)
}

// stopForTrial stops sv's current run (SIGTERM, SIGKILL after the grace
// period) and cancels a pending restart; the trial goes on in its exit, or
// at once when nothing runs.
func (s *supervisor) stopForTrial(sv *svc) {
	if sv.stopTimer != nil {
		sv.stopTimer()
		sv.stopTimer = nil
	}
	if sv.pid == 0 {
		s.trialStopped(sv)
		return
	}
	pid, t := sv.pid, sv.trial
	if err := syscall.Kill(-pid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	grace := s.Grace
	if grace == 0 {
		grace = defaultGrace
	}
	t.kill = s.Clock.AfterFunc(grace, func() {
		s.post(func() {
			if sv.trial == t && sv.pid == pid {
				s.Console.Logf("%s: still running %v after SIGTERM; sending SIGKILL", sv.Name, grace)
				syscall.Kill(-pid, syscall.SIGKILL)
			}
		})
	})
}

// trialStopped goes on once the service is down: into the new program
// (stopping) or back into the old one (undoing).
func (s *supervisor) trialStopped(sv *svc) {
	t := sv.trial
	if t.kill != nil {
		t.kill()
		t.kill = nil
	}
	sv.backoff, sv.failures, sv.textChecked = 0, 0, false
	switch t.phase {
	case trialStopping:
		if err := t.ops.Switch(); err != nil {
			// Nothing switched that Recover would not undo: start the old
			// program again.
			sv.trial = nil
			s.Console.Logf("%s: deploy: switching the program: %v; starting the old one again", sv.Name, err)
			s.start(sv)
			t.done <- update.TrialResult{Err: fmt.Errorf("switching %s's program: %w (the old one was started again)", sv.Name, err)}
			return
		}
		sv.Path = t.ops.Path
		t.phase, t.started = trialTrying, s.Clock.Now()
		s.armTrialDeadline(sv, t)
		s.start(sv)
	case trialUndoing:
		err := t.ops.Revert()
		sv.Path = t.ops.Path
		if err != nil {
			// The link may still name the new program: start the old one
			// by its own path, and say the store is wrong.
			sv.Path = t.oldPath
			t.reason += fmt.Sprintf("; switching back in the store failed (%v): the old program runs from %s until the next boot, which undoes the trial", err, t.oldPath)
		}
		t.phase = trialRestoring
		s.armTrialDeadline(sv, t)
		s.start(sv)
	}
}

func (s *supervisor) armTrialDeadline(sv *svc, t *trial) {
	if t.timer != nil {
		t.timer()
	}
	t.timer = s.Clock.AfterFunc(t.deadline, func() {
		s.post(func() {
			if sv.trial == t {
				s.trialTimeout(sv)
			}
		})
	})
}

// trialReady is called when sv is marked ready.
func (s *supervisor) trialReady(sv *svc) {
	t := sv.trial
	now := s.Clock.Now()
	switch t.phase {
	case trialTrying:
		if err := t.ops.Keep(); err != nil {
			// The new program runs and is ready; the store still says
			// trial, so the next boot would run the old one: say so.
			s.finishTrial(sv, update.TrialResult{Result: contract.DeployKept, Ready: now.Sub(t.started), Downtime: now.Sub(t.stopped),
				Err: fmt.Errorf("the new program is ready but ending the trial in the store failed (the next boot runs the old one): %w", err)})
			return
		}
		s.Console.Logf("%s: deploy: the new program is ready; kept", sv.Name)
		s.finishTrial(sv, update.TrialResult{Result: contract.DeployKept, Ready: now.Sub(t.started), Downtime: now.Sub(t.stopped)})
	case trialRestoring:
		s.Console.Logf("%s: deploy: the old program is ready again", sv.Name)
		s.finishTrial(sv, update.TrialResult{Result: contract.DeployRolledBack, Reason: t.reason, Downtime: now.Sub(t.stopped)})
	}
}

// trialExited handles an exit of sv during a trial; it reports whether the
// supervisor's usual handling (restart by policy) should follow.
func (s *supervisor) trialExited(sv *svc, how string) bool {
	t := sv.trial
	if s.stopping {
		s.finishTrial(sv, update.TrialResult{Err: errSupervisorDone})
		return false
	}
	switch t.phase {
	case trialStopping, trialUndoing:
		s.trialStopped(sv)
	case trialTrying:
		s.rollBack(sv, fmt.Sprintf("the new program %s before it was ready", how))
	case trialRestoring:
		s.finishTrial(sv, update.TrialResult{Result: contract.DeployRolledBack, Reason: t.reason + "; the old program " + how + " too, and restarts as usual"})
		return true
	}
	return false
}

// trialStartFailed handles a start that did not fork during a trial; it
// reports whether the usual handling should follow.
func (s *supervisor) trialStartFailed(sv *svc, how string) bool {
	return s.trialExited(sv, how)
}

func (s *supervisor) trialTimeout(sv *svc) {
	t := sv.trial
	switch t.phase {
	case trialTrying:
		s.rollBack(sv, fmt.Sprintf("the new program was not ready within %v", t.deadline))
	case trialRestoring:
		s.finishTrial(sv, update.TrialResult{Result: contract.DeployRolledBack, Reason: t.reason + fmt.Sprintf("; the old program was not ready within %v either", t.deadline)})
	}
}

func (s *supervisor) rollBack(sv *svc, reason string) {
	t := sv.trial
	s.Console.Logf("%s: deploy: %s; switching back to the old program", sv.Name, reason)
	t.reason, t.phase = reason, trialUndoing
	if t.timer != nil {
		t.timer()
		t.timer = nil
	}
	s.stopForTrial(sv)
}

func (s *supervisor) finishTrial(sv *svc, r update.TrialResult) {
	t := sv.trial
	for _, stop := range []func() bool{t.timer, t.kill} {
		if stop != nil {
			stop()
		}
	}
	sv.trial = nil
	t.done <- r
}

package nvinit

import "syscall"

// The supervisor's side of text repair: which failures lead to a check of
// the service's text, and what the console says about it. The store's side
// is in textrepair.go.

// textChecker checks the text of a service's program after the service
// failed, and repairs it if it can.
type textChecker interface {
	// CheckText checks the text the program (a path) maps. A zero Text
	// means nothing was checked: not an OFF2F program, or not one whose
	// text is in the store nvinit manages.
	CheckText(program string) (textCheck, error)
}

// textCheck is what CheckText found and did.
type textCheck struct {
	Text     string // the text file checked
	Damage   error  // what is wrong with it; nil: sound
	Repaired string // the clean copy it was rewritten from; "": not rewritten
}

// textSuspect reports whether the run of sv that ended with ws (healthy: it
// lasted healthyAfter) may have failed because of its text, and the text
// was not checked yet in this streak of failed starts. A damaged text kills
// the program with a fault signal when the damage runs before its runtime
// installs handlers, and otherwise makes it fail early in some way of its
// own (a Go runtime that catches the fault exits with status 2): so a fault
// at any time, and any failure before the service was ready or lasted
// healthyAfter, are suspect. Once per streak bounds the cost: a crash loop
// reads the text once, not at every restart.
func textSuspect(sv *svc, ws syscall.WaitStatus, healthy bool) bool {
	if sv.textChecked || ws.Exited() && ws.ExitStatus() == 0 {
		return false
	}
	return faultSignal(ws) || !sv.ready || !healthy
}

// checkText has the service's text checked, and repaired if damaged, before
// its restart. It runs on Run's goroutine and holds it: reading a text of
// a few MiB takes a fraction of a second, once per streak of failed starts,
// and the service must not start on the text while it is being rewritten.
func (s *supervisor) checkText(sv *svc) {
	sv.textChecked = true
	c, err := s.Texts.CheckText(sv.Path)
	switch {
	case c.Text == "":
		if err != nil {
			s.Console.Logf("%s: checking its text: %v", sv.Name, err)
		}
	case c.Repaired != "":
		s.Console.Logf("%s: text %s was damaged (%v); repaired from %s", sv.Name, c.Text, c.Damage, c.Repaired)
		if err != nil {
			s.Console.Logf("%s: %v", sv.Name, err)
		}
	case c.Damage != nil:
		s.Console.Logf("%s: text %s is damaged (%v); not repaired: %v", sv.Name, c.Text, c.Damage, err)
	case err != nil:
		s.Console.Logf("%s: checking text %s: %v", sv.Name, c.Text, err)
	default:
		s.Console.Logf("%s: text %s is sound: the failure is not the text's", sv.Name, c.Text)
	}
}

// faultSignal reports whether ws is a death by a signal the CPU raises on
// bad code or a bad mapping: what a damaged text causes.
func faultSignal(ws syscall.WaitStatus) bool {
	if !ws.Signaled() {
		return false
	}
	switch ws.Signal() {
	case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE, syscall.SIGTRAP:
		return true
	}
	return false
}

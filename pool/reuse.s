// Empty: lets reuse.go declare mainMain without a body (it is main.main,
// bound by go:linkname).

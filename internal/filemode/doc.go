// Package filemode names a file's type in words ("a directory", "a
// symbolic link", "a device"...), for errors that refuse a path for
// being the wrong kind of file (poold's socket path and programs, kv's log).
package filemode

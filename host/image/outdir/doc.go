// Package outdir names the files of an image directory, what nvboot build
// -o DIR writes: the builder (host/image/appliance) writes them, and the
// flasher (host/image/flash) and the CLI read them, without importing each
// other.
//
// StampFile marks a directory as a build output. A build replaces an
// existing directory only when it carries the stamp and holds nothing but
// OutputFiles, so a user's own directory is never replaced; the rule and
// its tests are host/image/appliance's (TestBuildOutputDirectory,
// TestBuildRefusesProjectDirectory).
package outdir

package nvinit

import (
	"fmt"

	"github.com/nvboot/nvboot/device/contract"
)

// fallbackEnv is what ld-off2f puts into the environment of a program it
// ran from the fallback copy after the store's copy failed: why it failed
// ("<store path>: <reason>"). nvinit's note records its text's CRC-32C, so
// the loader finds a damaged nvinit text before running it.
const fallbackEnv = "OFF2F_FALLBACK"

// repairOwnText, when the loader ran nvinit from the fallback copy after
// the store's copy failed (boot.OwnTextFallback), checks the store's copy
// of nvinit's text as a failed service's is checked (textRepair: the whole
// text hashed, rewritten from the clean copy when damaged), so the next
// boot runs the store's again. It runs after the store stage and before
// the services: the repair remounts the store, which only the
// supervisor's goroutine does once the services run. What it found is
// b.ownText, which the update endpoint's features report.
func (b *boot) repairOwnText() {
	why := b.OwnTextFallback
	if why == "" {
		return
	}
	con := b.Console
	con.Logf("own text: the loader ran the fallback copy: %s", why)
	if b.texts == nil {
		b.ownText = fmt.Sprintf("ran the fallback copy (%s); not repaired: no text store is mounted", why)
		con.Logf("own text: not repaired: no text store is mounted")
		return
	}
	c, err := b.texts.CheckText(or(b.InitPath, contract.Init))
	b.steps.Step("own-text-check")
	switch {
	case c.Repaired != "":
		con.Logf("own text: %s was damaged (%v); repaired from %s: the next boot runs it from the store", c.Text, c.Damage, c.Repaired)
		if err != nil {
			con.Logf("own text: %v", err)
		}
		b.ownText = fmt.Sprintf("ran the fallback copy (%s); repaired from %s", why, c.Repaired)
	case c.Damage != nil:
		con.Logf("own text: %s is damaged (%v); not repaired: %v", c.Text, c.Damage, err)
		b.ownText = fmt.Sprintf("ran the fallback copy (%s); not repaired: %v", why, err)
	case c.Text == "" || err != nil:
		if err == nil {
			err = fmt.Errorf("%s is not an OFF2F program of the store %s", or(b.InitPath, contract.Init), b.cfg.TextStore.DirOrDefault())
		}
		con.Logf("own text: not checked: %v", err)
		b.ownText = fmt.Sprintf("ran the fallback copy (%s); not checked: %v", why, err)
	default:
		// The store was provisioned again since, or what failed was not
		// the text's bytes (a store that did not mount).
		con.Logf("own text: %s is sound now", c.Text)
		b.ownText = fmt.Sprintf("ran the fallback copy (%s); the store's copy is sound now", why)
	}
}

// Package deploy is the host's side of the update endpoint nvinit serves:
// the client nvboot deploy, nvboot update and nvboot status use. device/contract names the
// endpoints and their messages; docs/UPDATE.md describes both protocols
// and the device's side.
//
// For a deploy it asks which texts the appliance holds (Have), sends a
// program's header file and, only when the store lacks it, its text, with
// the SHA-256 of the whole body (Deploy), and reads how the appliance's
// trial ended: kept, rolled back or unchanged. For an A/B update it sends a
// root or boot partition streamed with its size, hash and architecture
// (WritePartition), asks for the test boot naming both hashes, and the
// reboot. GC has the appliance remove what nothing uses; Pull reads what
// the appliance's puller last said of itself (nvboot status).
//
// # Design
//
//   - Send the text only when the store lacks it: deploying a program whose
//     text did not change sends its header file alone (about 0.3 MiB for
//     kv against 7.8 MiB of text, docs/BENCHMARKS.md).
//   - Every request carries HTTP Basic authentication, user nvboot and the
//     config's Update.HTTPPassword: gokrazy's field and gokrazy's rule (no
//     password, no endpoint), with net/http on both sides.
//   - TLS by pinning, not a CA (Pinned): nvboot build makes a self-signed
//     certificate once beside the config (host/selfsigned), and deploy
//     trusts that certificate and no other, whatever address it dials; a
//     device showing another is ErrNotPinned. A URL scheme that does not
//     match the config is refused before anything is sent.
//   - Errors name the cause: a refused password is ErrUnauthorized, any
//     other answer a StatusError carrying the appliance's message, and no
//     answer at all (the connection broke: a power cut, a reboot) a
//     NoAnswerError saying how much of the body went out, so a deploy sent
//     whole can be told apart: its outcome is unknown.
//
// # Invariants
//
//   - Only http or https URLs with a host and no path: TestParseURL.
//   - What a deploy sends (headers, body, the text only when needed), and
//     401 and 400 answers as errors naming the cause: TestDeployRequest.
//   - A connection that ends before the answer is a NoAnswerError, the
//     body sent whole or not: TestDeployWithoutAnswer.
//   - Against nvinit's real endpoint: device/nvinit's
//     TestDeployProtocolRollsBackAndGC, TestUpdateServerTLS, and
//     host/nvbootcmd's TestUpdateCommand and TestDeploySchemeMatchesTheConfig.
//
// # Limits
//
//   - Without UseTLS the password and the program cross the network in the
//     clear.
//   - An upload is sent whole each time; an A/B update sends the whole root
//     and boot partition (no delta).
package deploy

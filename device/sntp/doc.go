// Package sntp is the appliance's SNTP client (RFC 4330, the client mode
// of RFC 5905): nvinit runs a Keeper when its config names NTP servers
// (contract.Clock.NTP), so that a board without a real-time clock (a
// Raspberry Pi) gets the right time once its network is up.
//
// A query is one 48-byte UDP packet: version 4, mode 3 (client), its
// transmit timestamp a random nonce rather than the clock (which may read
// 1970, and a nonce is what an off-path forger cannot guess). The answer
// (Parse: strict, fuzzed) is refused, and the error says why, when it
// comes from another address, is not mode 4 (server), has a version
// other than 3 or 4, a leap indicator of 3 (the server is not
// synchronised), stratum 0 (a kiss-o'-death: its code, e.g. RATE or DENY,
// is named) or above 15, a zero transmit timestamp, or an origin
// timestamp other than the nonce. The offset and round-trip delay are
// RFC 4330's, from the client's send and receive times and the server's
// receive and transmit timestamps.
//
// # The keeper
//
// Keeper.Run asks the servers in turn, waiting 1 s, then twice as long
// after each round without a good answer, up to 64 s; it steps the clock
// (clock_settime) on the first good answer, then asks again every
// Interval (an hour by default): an offset within StepLimit (128 ms, as
// ntpd) is slewed by adjtimex's single-shot adjustment, a larger one
// stepped. Each step is logged, and a server's failure (no answer, an
// answer refused) once until it answers well. It never blocks a boot: nvinit
// runs it on a goroutine of its own and the services start meanwhile.
//
// # Decisions
//
//   - SNTP over a full NTP client (filtering, clock discipline): one
//     answer a while is enough for certificate checks and log times, and
//     the client stays about 400 lines of the standard library.
//   - The nonce as transmit timestamp over the clock's time: the origin
//     check needs only a value the client knows, and a device at 1970
//     would otherwise send a timestamp every server sees as absurd.
//   - Step first, then slew small offsets: a clock 56 years off must jump,
//     but once set, a jump backwards would upset timers and logs, so small
//     corrections are slewed.
//
// # Limits
//
//   - One server's answer is believed (no majority of several servers):
//     a server that lies, or an attacker on the path who sees the nonce,
//     sets the clock. NTS (authenticated NTP) is not built.
//   - Leap seconds are not announced to the kernel.
package sntp

/* tiny: a `true`-like program (gcc -static -Os). It writes two bytes so that
 * bench/exec can check that every layout ran the same program. */
#include <unistd.h>

int main(void)
{
	return write(1, "t\n", 2) == 2 ? 0 : 1;
}

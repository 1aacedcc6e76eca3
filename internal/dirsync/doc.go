// Package dirsync makes a directory's entries durable: fsync of a file
// created, renamed or removed there does not persist its name; fsync of the
// directory does. internal/atomicfile, pheap's Create, off2f's store,
// pager's layouts, the flasher and nvinit's deploy store call it after a
// link, a rename or a remove; their tests hold it.
package dirsync

package main

import (
	"encoding/binary"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

var boltBucket = []byte("bench")

// openBolt creates a fresh bbolt database at path with fsync on commit (the
// default), and its bucket.
func openBolt(path string) (*bolt.DB, func(), error) {
	os.Remove(path)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("opening bbolt %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket(boltBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("bbolt %s: %w", path, err)
	}
	return db, func() { db.Close(); os.Remove(path) }, nil
}

func boltUpdate64(db *boltDB, n int) (timing, error) {
	return timeTxs(n, func(i int) error {
		return db.Update(func(tx *bolt.Tx) error {
			v := val64(i)
			return tx.Bucket(boltBucket).Put([]byte("value"), v[:])
		})
	})
}

func boltMapInsert(db *boltDB, n int) (timing, error) {
	return timeTxs(n, func(i int) error {
		return db.Update(func(tx *bolt.Tx) error {
			v := val64(i)
			return tx.Bucket(boltBucket).Put(binary.BigEndian.AppendUint64(nil, mapKey(i)), v[:])
		})
	})
}

type boltDB = bolt.DB

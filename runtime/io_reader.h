/* io_reader.h -- placeholder */

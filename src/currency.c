/*-------------------------------------------------------------------------
 *
 * currency.c
 *	  The active ISO 4217 currency codes with their minor units, compiled
 *	  in, and pay_currency_list, which shows them.
 *
 * A code is looked up by binary search in one sorted static array, so the
 * checks are pure and cheap: no catalog, no SPI, no lock.  Only codes
 * that can be paid in are here: ISO 4217 gives the precious metals, the
 * bond market units, the SDR, the Sucre, the ADB unit of account and the
 * testing and "no currency" codes (XAG XAU XBA XBB XBC XBD XDR XPD XPT XSU
 * XTS XUA XXX) no minor units ("N.A."), and they are left out.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/tuplestore.h"

#include "currency.h"

PG_FUNCTION_INFO_V1(pay_currency_list);

typedef struct PayCurrency
{
	char		code[4];		/* three upper-case letters and a NUL */
	int			minor_units;	/* decimals after the point: 0 to 4 */
	const char *name;
} PayCurrency;

/*
 * The ISO 4217 active codes as Debian's iso-codes 4.15 lists them
 * (/usr/share/iso-codes/json/iso_4217.json, with the names it gives, in
 * ASCII: "Pa'anga", "Bolivar Soberano"), minor units from ISO 4217 table
 * A.1: 0 for BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF
 * XPF, 3 for BHD IQD JOD KWD LYD OMR TND, 4 for CLF UYW, 2 for the others;
 * amended since by ISO 4217's later changes: HRK (2023), ZWL (2024), ANG
 * and BGN (2026) withdrawn, ZWG (2024) and XCG (2025) added.
 *
 * To update it, edit the table by hand after an ISO 4217 amendment: add,
 * remove or change a row, and keep the rows sorted by code (in C's byte
 * order), since PayCurrencyMinorUnits searches it by halves.
 */
static const PayCurrency currencies[] = {
	{"AED", 2, "UAE Dirham"},
	{"AFN", 2, "Afghani"},
	{"ALL", 2, "Lek"},
	{"AMD", 2, "Armenian Dram"},
	{"AOA", 2, "Kwanza"},
	{"ARS", 2, "Argentine Peso"},
	{"AUD", 2, "Australian Dollar"},
	{"AWG", 2, "Aruban Florin"},
	{"AZN", 2, "Azerbaijan Manat"},
	{"BAM", 2, "Convertible Mark"},
	{"BBD", 2, "Barbados Dollar"},
	{"BDT", 2, "Taka"},
	{"BHD", 3, "Bahraini Dinar"},
	{"BIF", 0, "Burundi Franc"},
	{"BMD", 2, "Bermudian Dollar"},
	{"BND", 2, "Brunei Dollar"},
	{"BOB", 2, "Boliviano"},
	{"BOV", 2, "Mvdol"},
	{"BRL", 2, "Brazilian Real"},
	{"BSD", 2, "Bahamian Dollar"},
	{"BTN", 2, "Ngultrum"},
	{"BWP", 2, "Pula"},
	{"BYN", 2, "Belarusian Ruble"},
	{"BZD", 2, "Belize Dollar"},
	{"CAD", 2, "Canadian Dollar"},
	{"CDF", 2, "Congolese Franc"},
	{"CHE", 2, "WIR Euro"},
	{"CHF", 2, "Swiss Franc"},
	{"CHW", 2, "WIR Franc"},
	{"CLF", 4, "Unidad de Fomento"},
	{"CLP", 0, "Chilean Peso"},
	{"CNY", 2, "Yuan Renminbi"},
	{"COP", 2, "Colombian Peso"},
	{"COU", 2, "Unidad de Valor Real"},
	{"CRC", 2, "Costa Rican Colon"},
	{"CUC", 2, "Peso Convertible"},
	{"CUP", 2, "Cuban Peso"},
	{"CVE", 2, "Cabo Verde Escudo"},
	{"CZK", 2, "Czech Koruna"},
	{"DJF", 0, "Djibouti Franc"},
	{"DKK", 2, "Danish Krone"},
	{"DOP", 2, "Dominican Peso"},
	{"DZD", 2, "Algerian Dinar"},
	{"EGP", 2, "Egyptian Pound"},
	{"ERN", 2, "Nakfa"},
	{"ETB", 2, "Ethiopian Birr"},
	{"EUR", 2, "Euro"},
	{"FJD", 2, "Fiji Dollar"},
	{"FKP", 2, "Falkland Islands Pound"},
	{"GBP", 2, "Pound Sterling"},
	{"GEL", 2, "Lari"},
	{"GHS", 2, "Ghana Cedi"},
	{"GIP", 2, "Gibraltar Pound"},
	{"GMD", 2, "Dalasi"},
	{"GNF", 0, "Guinean Franc"},
	{"GTQ", 2, "Quetzal"},
	{"GYD", 2, "Guyana Dollar"},
	{"HKD", 2, "Hong Kong Dollar"},
	{"HNL", 2, "Lempira"},
	{"HTG", 2, "Gourde"},
	{"HUF", 2, "Forint"},
	{"IDR", 2, "Rupiah"},
	{"ILS", 2, "New Israeli Sheqel"},
	{"INR", 2, "Indian Rupee"},
	{"IQD", 3, "Iraqi Dinar"},
	{"IRR", 2, "Iranian Rial"},
	{"ISK", 0, "Iceland Krona"},
	{"JMD", 2, "Jamaican Dollar"},
	{"JOD", 3, "Jordanian Dinar"},
	{"JPY", 0, "Yen"},
	{"KES", 2, "Kenyan Shilling"},
	{"KGS", 2, "Som"},
	{"KHR", 2, "Riel"},
	{"KMF", 0, "Comorian Franc"},
	{"KPW", 2, "North Korean Won"},
	{"KRW", 0, "Won"},
	{"KWD", 3, "Kuwaiti Dinar"},
	{"KYD", 2, "Cayman Islands Dollar"},
	{"KZT", 2, "Tenge"},
	{"LAK", 2, "Lao Kip"},
	{"LBP", 2, "Lebanese Pound"},
	{"LKR", 2, "Sri Lanka Rupee"},
	{"LRD", 2, "Liberian Dollar"},
	{"LSL", 2, "Loti"},
	{"LYD", 3, "Libyan Dinar"},
	{"MAD", 2, "Moroccan Dirham"},
	{"MDL", 2, "Moldovan Leu"},
	{"MGA", 2, "Malagasy Ariary"},
	{"MKD", 2, "Denar"},
	{"MMK", 2, "Kyat"},
	{"MNT", 2, "Tugrik"},
	{"MOP", 2, "Pataca"},
	{"MRU", 2, "Ouguiya"},
	{"MUR", 2, "Mauritius Rupee"},
	{"MVR", 2, "Rufiyaa"},
	{"MWK", 2, "Malawi Kwacha"},
	{"MXN", 2, "Mexican Peso"},
	{"MXV", 2, "Mexican Unidad de Inversion (UDI)"},
	{"MYR", 2, "Malaysian Ringgit"},
	{"MZN", 2, "Mozambique Metical"},
	{"NAD", 2, "Namibia Dollar"},
	{"NGN", 2, "Naira"},
	{"NIO", 2, "Cordoba Oro"},
	{"NOK", 2, "Norwegian Krone"},
	{"NPR", 2, "Nepalese Rupee"},
	{"NZD", 2, "New Zealand Dollar"},
	{"OMR", 3, "Rial Omani"},
	{"PAB", 2, "Balboa"},
	{"PEN", 2, "Sol"},
	{"PGK", 2, "Kina"},
	{"PHP", 2, "Philippine Peso"},
	{"PKR", 2, "Pakistan Rupee"},
	{"PLN", 2, "Zloty"},
	{"PYG", 0, "Guarani"},
	{"QAR", 2, "Qatari Rial"},
	{"RON", 2, "Romanian Leu"},
	{"RSD", 2, "Serbian Dinar"},
	{"RUB", 2, "Russian Ruble"},
	{"RWF", 0, "Rwanda Franc"},
	{"SAR", 2, "Saudi Riyal"},
	{"SBD", 2, "Solomon Islands Dollar"},
	{"SCR", 2, "Seychelles Rupee"},
	{"SDG", 2, "Sudanese Pound"},
	{"SEK", 2, "Swedish Krona"},
	{"SGD", 2, "Singapore Dollar"},
	{"SHP", 2, "Saint Helena Pound"},
	{"SLE", 2, "Leone"},
	{"SLL", 2, "Leone"},
	{"SOS", 2, "Somali Shilling"},
	{"SRD", 2, "Surinam Dollar"},
	{"SSP", 2, "South Sudanese Pound"},
	{"STN", 2, "Dobra"},
	{"SVC", 2, "El Salvador Colon"},
	{"SYP", 2, "Syrian Pound"},
	{"SZL", 2, "Lilangeni"},
	{"THB", 2, "Baht"},
	{"TJS", 2, "Somoni"},
	{"TMT", 2, "Turkmenistan New Manat"},
	{"TND", 3, "Tunisian Dinar"},
	{"TOP", 2, "Pa'anga"},
	{"TRY", 2, "Turkish Lira"},
	{"TTD", 2, "Trinidad and Tobago Dollar"},
	{"TWD", 2, "New Taiwan Dollar"},
	{"TZS", 2, "Tanzanian Shilling"},
	{"UAH", 2, "Hryvnia"},
	{"UGX", 0, "Uganda Shilling"},
	{"USD", 2, "US Dollar"},
	{"USN", 2, "US Dollar (Next day)"},
	{"UYI", 0, "Uruguay Peso en Unidades Indexadas (UI)"},
	{"UYU", 2, "Peso Uruguayo"},
	{"UYW", 4, "Unidad Previsional"},
	{"UZS", 2, "Uzbekistan Sum"},
	{"VED", 2, "Bolivar Soberano"},
	{"VES", 2, "Bolivar Soberano"},
	{"VND", 0, "Dong"},
	{"VUV", 0, "Vatu"},
	{"WST", 2, "Tala"},
	{"XAF", 0, "CFA Franc BEAC"},
	{"XCD", 2, "East Caribbean Dollar"},
	{"XCG", 2, "Caribbean Guilder"},
	{"XOF", 0, "CFA Franc BCEAO"},
	{"XPF", 0, "CFP Franc"},
	{"YER", 2, "Yemeni Rial"},
	{"ZAR", 2, "Rand"},
	{"ZMW", 2, "Zambian Kwacha"},
	{"ZWG", 2, "Zimbabwe Gold"},
};

/* The minor units of code, or -1 when it is not a code of the table. */
int
PayCurrencyMinorUnits(const char *code, size_t len)
{
	int			low = 0;
	int			high = (int) lengthof(currencies) - 1;

	if (len != 3)
		return -1;
	while (low <= high)
	{
		int			mid = low + (high - low) / 2;
		int			cmp = memcmp(code, currencies[mid].code, 3);

		if (cmp == 0)
			return currencies[mid].minor_units;
		if (cmp < 0)
			high = mid - 1;
		else
			low = mid + 1;
	}
	return -1;
}

/*
 * Whether amount needs no more than minor_units decimals.  numeric_min_scale
 * is the number of decimals the value needs, trailing zeros not counted
 * (10.50 needs 1, 10.000 and 100 need 0, 1e-2 needs 2), so a display scale
 * wider than the currency's is no refusal.  NaN and Infinity have no scale
 * and fit no currency.
 */
bool
PayAmountFitsMinorUnits(Numeric amount, int minor_units)
{
	Assert(minor_units >= 0);

	if (numeric_is_nan(amount) || numeric_is_inf(amount))
		return false;
	return DatumGetInt32(DirectFunctionCall1(numeric_min_scale,
											 NumericGetDatum(amount))) <= minor_units;
}

/*
 * pay_currency_list(OUT code text, OUT minor_units integer, OUT name text)
 * returns setof record: every row of the table, in code order.
 */
Datum
pay_currency_list(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);

	for (size_t i = 0; i < lengthof(currencies); i++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, false};

		values[0] = CStringGetTextDatum(currencies[i].code);
		values[1] = Int32GetDatum(currencies[i].minor_units);
		values[2] = CStringGetTextDatum(currencies[i].name);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
